"""The ``kbench`` command: ``run`` (Hydra overrides), ``report``, ``tasks``, ``doctor``.

A user's mistake ends with one line on stderr and exit code 2, before any work starts;
Ctrl-C ends with 130 and leaves the run resumable.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console

from runner.executors.base import ExecutorUnavailable
from runner.executors.bytecode import keep_own_bytecode, own_bytecode_cache
from runner.paths import SUITES_DIR, TASKS_DIR
from runner.tracking.opening import TrackingBeside

USER_ERROR = 2


class UserError(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbench", description="Benchmark GPU kernels against PyTorch, reproducibly.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an experiment: kbench run experiment=cpu_smoke [key=value ...]")
    run.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. experiment=cpu_smoke suite.limit=3")
    report = sub.add_parser("report", help="write and print report.md of a run (a run directory or an MLflow run id)")
    report.add_argument("run")
    report.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    tasks = sub.add_parser("tasks", help="list, lock or validate tasks")
    tasks_sub = tasks.add_subparsers(dest="tasks_command", required=True)
    listing = tasks_sub.add_parser("list", help="show tasks")
    listing.add_argument("--suite", default="full")
    listing.add_argument("--category")
    tasks_sub.add_parser("lock", help="regenerate manifests/suites/*.yaml from the task files")
    validate = tasks_sub.add_parser("validate", help="prove tasks are not degenerate")
    validate.add_argument("--suite", default="full")
    validate.add_argument("--category")
    validate.add_argument(
        "--device", default="cpu", help="cpu (small shapes) or cuda (every shape, eager time, memory)"
    )
    validate.add_argument("--json", help="also write every task's outcome to this JSON file")
    doctor = sub.add_parser("doctor", help="show what kbench sees: packages, GPU, NVML")
    doctor.add_argument(
        "--calibrate", action="store_true", help="measure this GPU's copy bandwidth and matmul rates (GPU only)"
    )
    doctor.add_argument("--hardware", default="h100", help="hardware config whose peaks to compare with")
    doctor.add_argument("--json", help="also write the readings to this JSON file")
    args = parser.parse_args(argv)
    if argv is None:
        # A process started for this command: its imports keep their bytecode where the install has none for them
        # (``bytecode.keep_own_bytecode``; 5-6 s of a run's set-up on the H200 machine).
        keep_own_bytecode(own_bytecode_cache())
    console = Console(stderr=False)
    # SIGTERM (a batch system's or `timeout`'s) ends a run like Ctrl-C: the sandbox is killed,
    # the manifest written, and the same command resumes it.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.command == "run":
            # The process's own command line (the console script, ``python -m runner.cli``): the process exists for
            # this run, and its start is the set-up's. Given ``argv``, it may be older than the run: not counted.
            return command_run(args.overrides, console, own_process=argv is None)
        if args.command == "report":
            return command_report(args.run, args.tracking_uri, console)
        if args.command == "tasks":
            return command_tasks(args, console)
        return command_doctor(args, console)
    except (UserError, ExecutorUnavailable) as exc:
        # ExecutorUnavailable mid-run: the engine went away; the run is resumable, no candidate blamed.
        print(f"kbench: {exc}", file=sys.stderr)
        return USER_ERROR
    except KeyboardInterrupt:
        print("kbench: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _what_changed(run_path: Path, cfg) -> str:
    """Why an unfinished run of the same name is not resumed: the settings that differ from its ``config.yaml``."""
    import yaml
    from omegaconf.errors import OmegaConfBaseException

    from runner.configure import changed_settings

    saved = run_path / "config.yaml"
    try:
        changes = changed_settings(saved.read_text(), cfg)
    except (OSError, ValueError, yaml.YAMLError, OmegaConfBaseException) as exc:  # a notice only: never in the way
        return f"another configuration (its config.yaml cannot be read: {str(exc).splitlines()[0][:200]})"
    if not changes:
        return "another configuration (the same settings under another kbench version's hash)"
    shown = ", ".join(changes[:6]) + (f" and {len(changes) - 6} more" if len(changes) > 6 else "")
    return f"its configuration differs in {shown}"


def _quiet_libraries() -> None:
    import mlflow  # noqa: F401  (configures its loggers on import; quieten them after)

    for name in ("alembic", "mlflow", "urllib3", "git"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _executor_settings(cfg, settings):
    """The executor's settings from the composed configuration; the cache folder is given when the executor starts."""
    from runner.executors import ExecutorSettings
    from runner.executors.image_lock import LOCK_PATH

    return ExecutorSettings(
        timeout_s=cfg.executor.timeout_s,
        output_limit_bytes=cfg.executor.output_limit_mb << 20,
        file_size_limit_bytes=cfg.executor.file_size_limit_mb << 20,
        env_passthrough=tuple(cfg.executor.env_passthrough),
        prestart=cfg.executor.prestart,
        start=cfg.executor.start.value,
        in_flight=cfg.executor.in_flight,
        compile_threads=cfg.executor.compile_threads,
        spare_context_under_token=cfg.executor.spare_context_under_token,
        memory_limit_bytes=cfg.executor.memory_limit_mb << 20,
        pids_limit=cfg.executor.pids_limit,
        cpus=cfg.executor.cpus,
        scratch_mb=cfg.executor.scratch_mb,
        image=cfg.executor.image or ("gpu" if settings.device == "cuda" else "cpu"),
        image_lock=Path(cfg.executor.image_lock) if cfg.executor.image_lock else LOCK_PATH,
        allow_unlocked_image=cfg.executor.allow_unlocked_image,
        gpu_request=cfg.executor.gpu_request.value,
        cdi_kind=cfg.executor.cdi_kind,
        shared_compile_cache=cfg.executor.shared_compile_cache,
    )


def _start_executor(requested: str, executor_settings, cache_dir: Path, lane_ids: list[str | None]):
    """The run's executor with its compile caches in ``cache_dir``, what it may start before the sweep started
    (``Executor.prepare``: the local executor's fork servers import meanwhile)."""
    from runner.executors import make_executor

    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        executor = make_executor(requested, replace(executor_settings, cache_dir=cache_dir.resolve()))
    except ExecutorUnavailable as exc:
        raise UserError(str(exc)) from None
    executor.prepare(lane_ids)
    return executor


def command_run(overrides: list[str], console: Console, own_process: bool = False) -> int:
    from runner.setup_clock import SetupClock, added_parts

    # The set-up's parts up to the sweep's start (manifest setup_parts_s), from the process's start if it is the run's.
    setup = SetupClock(from_process_start=own_process)
    from omegaconf import OmegaConf

    from runner.configure import ConfigError, compose_config, hashed_yaml, to_settings, wrong_gpu
    from runner.executors import preflight
    from runner.gpu.nvml import read_gpu
    from runner.registry import UnknownName
    from runner.run_settings import lane_gpu_id

    try:
        cfg = compose_config(overrides)
        settings = to_settings(cfg)
        setup.mark("configuration")
        executor_settings = _executor_settings(cfg, settings)
        # Which executor runs (executor=auto resolved): no engine or no locked image stops here.
        choice = preflight(settings.executor, executor_settings)
        setup.mark("executor_checks")
    except (ConfigError, UnknownName, ExecutorUnavailable) as exc:
        raise UserError(str(exc)) from None
    requested = settings.executor
    settings = replace(settings, executor=choice.kind)
    if choice.fallback:
        console.print(
            f"[bold red]executor=auto: docker is not usable ({choice.fallback}); "
            "running in the host environment, not in a container"
        )
    for warning in choice.warnings:
        console.print(f"[yellow]{warning}")
    gpu = {"available": False, "why": "CPU run"}
    lane_ids: list[str | None] = [None]  # the host's one lane
    if settings.device == "cuda":
        # Every GPU of hardware.gpus, before anything is written: a run asking for a GPU that is not
        # there fails once, here, with one line naming it.
        readings = [read_gpu(index) for index in settings.gpus]
        for index, reading in zip(settings.gpus, readings):
            if not reading.get("available"):
                raise UserError(
                    f"hardware={settings.hardware} asks for GPU {index}, but none is usable: {reading.get('why')}"
                )
            mismatch = wrong_gpu(settings.hardware, settings.gpu_name, index, reading)
            if mismatch:
                raise UserError(mismatch)
        gpu = readings[0]
        lane_ids = [lane_gpu_id(index, reading) for index, reading in zip(settings.gpus, readings)]
        setup.mark("gpu_readings")
    executor = None
    try:
        if cfg.executor.compile_cache_dir:
            # The executor's caches do not wait for the run directory: its fork servers start their imports (3.7-4.0 s
            # on the H200 machine, which the sweep's first measurement waited on) before the tasks, the orchestrator's
            # and the analysis' imports (pandas) and the run directory (BENCHMARKS.md, forty-seventh session).
            executor = _start_executor(requested, executor_settings, Path(cfg.executor.compile_cache_dir), lane_ids)
            setup.mark("executor")
        from runner.closing import finish
        from runner.executors import make_executor
        from runner.executors.local import LocalExecutor
        from runner.orchestrator import Orchestrator, RunAborted
        from runner.planning import plan
        from runner.rundir import RunDirBusy, config_hash, open_run_dir
        from runner.tasks.model import TaskError
        from runner.tasks.suites import SuiteSelection, resolve_suite
        from runner.tracking.fingerprint import host_fingerprint

        try:
            selection = SuiteSelection(
                cfg.suite.name,
                cfg.suite.layout.value,
                cfg.suite.path,
                tuple(cfg.suite.tasks),
                tuple(cfg.suite.categories),
                tuple(cfg.suite.levels),
                cfg.suite.limit,
                cfg.suite.shard,
            )
            tasks = resolve_suite(selection, TASKS_DIR, SUITES_DIR)
            evaluations = plan(tasks, settings)
        except (ConfigError, TaskError, UnknownName) as exc:
            raise UserError(str(exc)) from None
        setup.mark("suite")
        resolved = OmegaConf.to_yaml(cfg)
        cfg_hash = config_hash(hashed_yaml(cfg))
        try:
            run_dir = open_run_dir(
                Path(cfg.run.out_dir), settings.name, cfg_hash, resume=cfg.run.resume.value == "auto"
            )
        except RunDirBusy as exc:
            raise UserError(str(exc)) from None
        for left in run_dir.not_resumed:
            console.print(
                f"not resuming {left}: {_what_changed(left, cfg)}; a new run starts", markup=False, soft_wrap=True
            )
        setup.mark("run_dir")
        if executor is None:
            # Without executor.compile_cache_dir the compile caches live in the run, shared by its sandboxes and by
            # the warm-up pass.
            executor = _start_executor(requested, executor_settings, run_dir.path / "cache", lane_ids)
            setup.mark("executor")
    except BaseException:
        if executor is not None:
            executor.close()  # its fork servers and their folders: nothing of the run was started
        raise
    executor_settings = executor.settings  # with its cache folder
    manifest = run_dir.read_manifest()
    host = host_fingerprint()
    setup.mark("fingerprint")
    if not manifest:
        (run_dir.path / "config.yaml").write_text(resolved)
        manifest = {
            "name": settings.name,
            "run_dir": str(run_dir.path),
            "config_hash": cfg_hash,
            "created": time.time(),
            "suite": settings.suite,
            "hardware": settings.hardware,
            # One lane per GPU (hardware.gpus); a CPU run is one lane, the host.
            "lanes": len(settings.gpus) if settings.device == "cuda" else 1,
            "methods": list(settings.methods),
            "planned": len(evaluations),
            "status": "running",
            "wall_s": 0.0,
            "mlflow_run_id": None,
            "overrides": overrides,
            "suite_lock": [{"id": t.task_id, "hash": t.content_hash} for t in tasks],
            "environment": {"host": host, "executor": executor.environment(), "gpu": gpu},
        }
    else:
        console.print(f"resuming run {run_dir.path}")
    run_dir.write_manifest(manifest)  # MLflow's thread logs it as the parent's artifact, as it stands, until the end
    tracking = None
    if cfg.tracking.enabled:
        parent_params = {
            "name": settings.name,
            "suite": settings.suite,
            "hardware": settings.hardware,
            "methods": ",".join(settings.methods),
            "model": settings.model,
            "executor": settings.executor,
            "seed": settings.seed,
            "trials": settings.trials,
            "timed_shape_trials": settings.timed_shape_trials or settings.trials,
            "config_hash": cfg_hash,
            "evaluations": len(evaluations),
        }
        parent_tags = {
            "git_commit": host["git_commit"],
            "kbench_version": host["kbench_version"],
            "run_dir": str(run_dir.path.resolve()),
        }
        resumed_parent = manifest.get("mlflow_run_id")

        def open_tracking(clock):
            # In a thread beside the sweep's start (runner/tracking/opening.py): nothing here touches the manifest.
            _quiet_libraries()
            from runner.tracking.mlflow_sink import MlflowSink

            clock.mark("mlflow_import")
            sink = MlflowSink(cfg.tracking.uri, cfg.tracking.experiment)
            clock.mark("mlflow_store")
            parent = sink.start_parent(resumed_parent, run_dir.path.name, params=parent_params, tags=parent_tags)
            sink.log_parent_artifacts(parent, [run_dir.path / "config.yaml", run_dir.manifest_path])
            clock.mark("mlflow_parent_run")
            return sink, parent

        def parent_opened(parent_run_id: str) -> None:  # on the run's main thread: the manifest's only writer
            manifest["mlflow_run_id"] = parent_run_id
            run_dir.write_manifest(manifest)

        def unavailable(why: str) -> None:
            console.print(
                f"MLflow unavailable ({why}); results stay in {run_dir.path}", style="red", markup=False, soft_wrap=True
            )

        tracking = TrackingBeside(open_tracking, parent_opened, unavailable)
    console.print(
        f"run {run_dir.path}: {len(evaluations)} evaluations "
        f"({len(tasks)} tasks × {len(settings.methods)} methods) on {settings.hardware}, executor {settings.executor}"
    )
    if settings.executor == "docker" and not executor_settings.shared_compile_cache:
        # Each container compiles into its own tmpfs: a warm-up pass would fill caches nobody reads.
        warmup_executor = None
        if settings.warmup_workers:
            console.print("compile warm-up off: containers have private compile caches (executor.shared_compile_cache)")
    else:
        warmup_executor = make_executor(requested, replace(executor_settings, prestart=0, in_flight=1))
        if isinstance(warmup_executor, LocalExecutor) and isinstance(executor, LocalExecutor):
            warmup_executor.borrow_fork_servers(executor)
    orchestrator = Orchestrator(settings, run_dir, executor, tracking, console, host["git_commit"], warmup_executor)
    setup.mark("orchestrator")
    started = time.perf_counter()
    # Before the sweep: the interpreter's start, the configuration, the tasks, the executor's checks, the GPU
    # readings (the fork servers import meanwhile; MLflow opens beside the sweep's start). Not in ``wall_s``;
    # ``runner.bench duty`` adds it back. A resumed run adds each invocation's.
    manifest["setup_s"] = manifest.get("setup_s", 0.0) + setup.total()
    manifest["setup_parts_s"] = added_parts(manifest.get("setup_parts_s"), setup.parts)
    # This invocation's process start and sweep start, epoch seconds (a resumed run keeps its last): what the sweep's
    # first job and measurement waited for from there, with the workers' records (``runner.analysis.duty.sweep_start``).
    manifest["last_invocation"] = {"process_started": setup.process_started, "sweep_started": time.time()}
    try:
        orchestrator.run(evaluations)
    except RunAborted as exc:
        raise UserError(str(exc)) from None
    finally:
        manifest["wall_s"] = manifest.get("wall_s", 0.0) + time.perf_counter() - started
        manifest["warmup_s"] = manifest.get("warmup_s", 0.0) + orchestrator.warmup_s
        if orchestrator.warmup_beside is not None:
            manifest["warmup_beside"] = orchestrator.warmup_beside
        run_dir.write_manifest(manifest)
        if warmup_executor is not None:
            warmup_executor.close()
        executor.close()
        sink = None
        if tracking is not None:
            # MLflow's parent run into the manifest (``parent_opened``), for a resume, where no result was logged yet.
            sink, _ = tracking.wait()
            manifest["tracking_beside_s"] = tracking.record()
            run_dir.write_manifest(manifest)
    manifest["status"] = "finished"
    manifest["finished"] = time.time()
    run_dir.write_manifest(manifest)
    report = finish(run_dir, manifest, sink, console)
    run_dir.release()
    print(report)
    console.print(f"report: {run_dir.path / 'report.md'}")
    return 0


def command_report(run: str, tracking_uri: str, console: Console) -> int:
    from runner.analysis.records import records_from_jsonl, records_from_run_dir
    from runner.analysis.report import render_report

    path = Path(run)
    if path.is_dir():
        manifest_path = path / "manifest.json"
        if not manifest_path.exists():
            raise UserError(f"{path} is not a kbench run directory (no manifest.json)")
        manifest = json.loads(manifest_path.read_text())
        frame = records_from_run_dir(path)
        output = path / "report.md"
    else:
        _quiet_libraries()
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=tracking_uri)
        try:
            client.get_run(run)
            with tempfile.TemporaryDirectory() as tmp:
                manifest = json.loads(Path(client.download_artifacts(run, "manifest.json", tmp)).read_text())
                frame = records_from_jsonl(Path(client.download_artifacts(run, "results.jsonl", tmp)))
        except MlflowException as exc:
            raise UserError(
                f"{run} is neither a run directory nor a finished MLflow run in {tracking_uri}: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        output = Path(f"report-{run[:12]}.md")
    text = render_report(frame, manifest)
    output.write_text(text)
    print(text)
    console.print(f"report: {output}")
    return 0


def command_tasks(args, console: Console) -> int:
    from rich.table import Table

    from runner.tasks.model import TaskError
    from runner.tasks.suites import SuiteSelection, resolve_suite, write_locks

    try:
        if args.tasks_command == "lock":
            for path in write_locks(TASKS_DIR, SUITES_DIR):
                console.print(f"locked {path}")
            return 0
        categories = (args.category,) if args.category else ()
        tasks = resolve_suite(SuiteSelection(args.suite, categories=categories), TASKS_DIR, SUITES_DIR)
    except TaskError as exc:
        raise UserError(str(exc)) from None
    if args.tasks_command == "list":
        table = Table(title=f"suite {args.suite}")
        for column in ("id", "category", "level", "dtype", "perf shape"):
            table.add_column(column)
        for task in tasks:
            perf = task.shapes.get("perf") or task.shapes[task.shape_names()[-1]]
            table.add_row(
                task.task_id, task.category, str(task.level), task.dtype, " ".join(f"{k}={v}" for k, v in perf.items())
            )
        console.print(table)
        console.print(f"{len(tasks)} tasks in {len({t.category for t in tasks})} categories")
        return 0
    from runner.tasks.validate import validate_task

    started = time.perf_counter()
    outcomes = []
    for task in tasks:
        outcome = validate_task(task, device=args.device)
        outcomes.append(outcome)
        peak = f" peak {outcome.peak_bytes / 2**30:.2f} GiB" if outcome.peak_bytes else ""
        eager = "".join(f" {shape} {ms:.3f} ms" for shape, ms in outcome.eager_ms.items())
        console.print(
            f"{'ok  ' if outcome.ok else '[red]FAIL[/]'} {task.task_id} ({outcome.seconds:.2f}s{peak}{eager})"
        )
        for failure in outcome.failures:
            console.print(f"      - {failure}")
    failed = sum(not outcome.ok for outcome in outcomes)
    console.print(f"{len(tasks) - failed} of {len(tasks)} tasks pass ({time.perf_counter() - started:.1f}s)")
    eager = sorted(ms for outcome in outcomes for ms in outcome.eager_ms.values())
    if eager:
        console.print(
            f"eager time of the performance shapes: min {eager[0]:.3f} ms, median {eager[len(eager) // 2]:.3f} ms, "
            f"max {eager[-1]:.3f} ms; peak memory max {max(o.peak_bytes or 0 for o in outcomes) / 2**30:.2f} GiB"
        )
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(outcome) for outcome in outcomes], indent=1))
    return 1 if failed else 0


def command_doctor(args, console: Console) -> int:
    from runner.gpu.nvml import read_gpu
    from runner.tracking.fingerprint import host_fingerprint

    readings = {"host": host_fingerprint(), "gpu0": read_gpu(0)}
    if args.calibrate:
        from runner.configure import ConfigError, compose_config, to_settings, wrong_gpu
        from runner.gpu.calibrate import calibrate

        try:
            settings = to_settings(compose_config([f"hardware={args.hardware}", "method=reference"]))
        except ConfigError as exc:
            raise UserError(str(exc)) from None
        mismatch = readings["gpu0"].get("available") and wrong_gpu(
            settings.hardware, settings.gpu_name, 0, readings["gpu0"]
        )
        if mismatch:
            raise UserError(f"doctor --calibrate --hardware {args.hardware}: {mismatch}")
        readings["calibration"] = calibrate(settings.peaks)
        if not readings["calibration"]["available"]:
            raise UserError("doctor --calibrate needs a CUDA GPU; none is visible")
    text = json.dumps(readings, default=str, indent=1)
    console.print_json(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
