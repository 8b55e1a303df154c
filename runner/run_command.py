"""``kbench run``: the configuration composed and checked, the GPUs read, the executor started, the suite planned,
the run directory opened (or resumed), MLflow opened beside the sweep, then the sweep (``orchestrator.py``) and the
run's close (``closing.py``). The set-up before the sweep is timed in parts (``setup_clock.py``): imports wait until
the step that needs them, so the fork servers' own imports start early.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from runner.executors.base import ExecutorUnavailable, keep_dismissed_spares
from runner.paths import SUITES_DIR, TASKS_DIR
from runner.tracking.opening import TrackingBeside
from runner.tracking.source_diff import SOURCE_DIFF, source_diff
from runner.user_error import UserError


def command_run(overrides: list[str], console: Console, own_process: bool = False) -> int:
    """``kbench run OVERRIDES``: 0 once the run has finished and its report is written; ``UserError`` for what the user
    asked wrongly (before any work where it can be known then). ``own_process``: the process was started for this run,
    so its start is the set-up's."""
    from runner.setup_clock import SetupClock, added_parts

    # The set-up's parts up to the sweep's start (manifest setup_parts_s), from the process's start if it is the run's.
    setup = SetupClock(from_process_start=own_process)
    from omegaconf import OmegaConf

    from runner.configure import ConfigError, compose_config, hashed_yaml, to_settings
    from runner.executors import preflight
    from runner.registry import UnknownName

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
    gpu, lane_ids = _read_gpus(settings)
    if settings.device == "cuda":
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
    manifest = run_dir.read_manifest()
    host = host_fingerprint()
    setup.mark("fingerprint")
    if not manifest:
        (run_dir.path / "config.yaml").write_text(resolved)
        # A checkout that differs from its commit: the difference beside the manifest, so the tree can be rebuilt.
        diff = source_diff()
        if isinstance(diff, str):
            host["source_diff"] = diff  # why no patch could be taken
        else:
            host["source_diff"] = diff.record()
            if diff.changed:
                (run_dir.path / SOURCE_DIFF).write_bytes(diff.patch)
        setup.mark("source_diff")
        environment = {"host": host, "executor": executor.environment(), "gpu": gpu}
        manifest = _new_manifest(settings, run_dir, cfg_hash, overrides, evaluations, tasks, environment)
    else:
        console.print(f"resuming run {run_dir.path}")
    run_dir.write_manifest(manifest)  # MLflow's thread logs it as the parent's artifact, as it stands, until the end
    tracking = None
    if cfg.tracking.enabled:
        tracking = _tracking_beside(cfg, settings, cfg_hash, len(evaluations), host, run_dir, manifest, console)
    console.print(
        f"run {run_dir.path}: {len(evaluations)} evaluations "
        f"({len(tasks)} tasks × {len(settings.methods)} methods) on {settings.hardware}, executor {settings.executor}"
    )
    warmup_executor = _warmup_executor(settings, requested, executor, console)
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
        keep_dismissed_spares(run_dir.path, executor.dismissed_spares())  # their device work, for `disturbed`
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


def quiet_libraries() -> None:
    """MLflow imported and its libraries' loggers (alembic, urllib3, git) kept to warnings: a run's output and a
    report's are kbench's own lines."""
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


def _read_gpus(settings) -> tuple[dict, list[str | None]]:
    """The first GPU's reading and every lane's id (UUID, else its index): every GPU of ``hardware.gpus`` read before
    anything is written, so a run asking for one that is not there (or is another model than the hardware config's)
    fails once, here, with one line naming it. A CPU run: no reading, the host's one lane."""
    from runner.configure import wrong_gpu
    from runner.gpu.nvml import read_gpu
    from runner.run_settings import lane_gpu_id

    if settings.device != "cuda":
        return {"available": False, "why": "CPU run"}, [None]
    readings = [read_gpu(index) for index in settings.gpus]
    for index, reading in zip(settings.gpus, readings):
        if not reading.get("available"):
            raise UserError(
                f"hardware={settings.hardware} asks for GPU {index}, but none is usable: {reading.get('why')}"
            )
        mismatch = wrong_gpu(settings.hardware, settings.gpu_name, index, reading)
        if mismatch:
            raise UserError(mismatch)
    return readings[0], [lane_gpu_id(index, reading) for index, reading in zip(settings.gpus, readings)]


def _new_manifest(
    settings, run_dir, cfg_hash: str, overrides: list[str], evaluations: list, tasks: list, environment: dict
) -> dict:
    """A new run's manifest: what it is, what it plans, the suite's tasks locked by content hash, and where it runs
    (``environment``: the host's fingerprint, the executor's, the first GPU's reading)."""
    return {
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
        "environment": environment,
    }


def _tracking_beside(
    cfg, settings, cfg_hash: str, evaluations: int, host: dict, run_dir, manifest: dict, console: Console
) -> TrackingBeside:
    """MLflow's parent run opened in a thread beside the sweep's start (``runner/tracking/opening.py``), its id written
    to the manifest once open (on the main thread, the manifest's only writer); where MLflow is unavailable, the run
    says so and goes on, its results on disk."""
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
        "evaluations": evaluations,
    }
    parent_tags = {
        "git_commit": host["git_commit"],
        "kbench_version": host["kbench_version"],
        "run_dir": str(run_dir.path.resolve()),
    }
    resumed_parent = manifest.get("mlflow_run_id")

    def open_tracking(clock):
        # In a thread beside the sweep's start (runner/tracking/opening.py): nothing here touches the manifest.
        quiet_libraries()
        from runner.tracking.mlflow_sink import MlflowSink

        clock.mark("mlflow_import")
        sink = MlflowSink(cfg.tracking.uri, cfg.tracking.experiment)
        clock.mark("mlflow_store")
        parent = sink.start_parent(resumed_parent, run_dir.path.name, params=parent_params, tags=parent_tags)
        kept = [run_dir.path / name for name in ("config.yaml", SOURCE_DIFF) if (run_dir.path / name).exists()]
        sink.log_parent_artifacts(parent, [*kept, run_dir.manifest_path])
        clock.mark("mlflow_parent_run")
        return sink, parent

    def parent_opened(parent_run_id: str) -> None:  # on the run's main thread: the manifest's only writer
        manifest["mlflow_run_id"] = parent_run_id
        run_dir.write_manifest(manifest)

    def unavailable(why: str) -> None:
        console.print(
            f"MLflow unavailable ({why}); results stay in {run_dir.path}", style="red", markup=False, soft_wrap=True
        )

    return TrackingBeside(open_tracking, parent_opened, unavailable)


def _warmup_executor(settings, requested: str, executor, console: Console):
    """The compile warm-up's executor (one sandbox at a time, none started ahead; a local one forks from the run's
    fork servers), or None where containers compile into caches of their own, which a warm-up would fill for nobody."""
    from runner.executors import make_executor
    from runner.executors.local import LocalExecutor

    executor_settings = executor.settings
    if settings.executor == "docker" and not executor_settings.shared_compile_cache:
        if settings.warmup_workers:
            console.print("compile warm-up off: containers have private compile caches (executor.shared_compile_cache)")
        return None
    warmup_executor = make_executor(requested, replace(executor_settings, prestart=0, in_flight=1))
    if isinstance(warmup_executor, LocalExecutor) and isinstance(executor, LocalExecutor):
        warmup_executor.borrow_fork_servers(executor)
    return warmup_executor
