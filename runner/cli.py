"""The ``kbench`` command: ``run`` (Hydra overrides), ``report``, ``tasks``, ``doctor``.

A user's mistake ends with one line on stderr and exit code 2, before any work starts;
Ctrl-C ends with 130 and leaves the run resumable.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.executors.base import ExecutorUnavailable
from runner.executors.bytecode import keep_own_bytecode, own_bytecode_cache
from runner.paths import SUITES_DIR, TASKS_DIR
from runner.run_command import command_run, quiet_libraries
from runner.user_error import USER_ERROR, UserError


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
        quiet_libraries()
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
