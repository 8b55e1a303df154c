"""Plan → dispatch → collect: the host side of a ``kbench run``.

Plan: the suite's tasks × the configured methods give candidates (content-addressed files)
and one job directory per evaluation. Dispatch: per evaluation, hold the device lock, pass
the NVML health gate (GPU), hand the job to the executor. Collect: read the worker's result,
or decide the verdict from how the sandbox ended; journal it; mirror it to MLflow. A journal
makes the run resumable after Ctrl-C or SIGKILL: finished evaluations are not redone and
nothing is logged twice.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from runner.executors import Executor
from runner.gpu.lock import device_lock
from runner.gpu.nvml import health_gate, read_gpu
from runner.methods import METHODS, Candidate, MethodUnavailable
from runner.progress import RunProgress
from runner.rundir import RunDir
from runner.tasks.model import Task
from runner.tracking.child_record import child_record
from runner.tracking.journal import Journal
from runner.tracking.mlflow_sink import MlflowSink, SinkError
from runner.worker.protocol import (
    CANDIDATE_FILE,
    JOB_FILE,
    OUT_DIR,
    PROTOCOL_VERSION,
    RESULT_FILE,
    STAGE_FILE,
    TASK_FILE,
    Result,
    Verdict,
    write_json_atomic,
)

# Stages in which only harness code has run: a crash there is never the candidate's fault.
_HARNESS_STAGES = ("start", "reference")


@dataclass
class Evaluation:
    eval_id: str
    task: Task
    method: str
    candidate: Candidate | None
    missing_reason: str = ""


@dataclass
class RunSettings:
    """What the orchestrator needs from the composed config, as plain values."""

    name: str
    suite: str
    hardware: str
    device: str  # "cpu" or "cuda"
    gpus: list[int]
    check_shapes: list[str]
    timed_shape: str
    cpu_threads: int | None
    max_temperature_c: int | None
    methods: dict[str, dict]
    model: str
    executor: str
    seed: int
    trials: int
    timing: dict | None
    progress: bool
    warmup_workers: int = 0
    peaks: dict | None = None  # {"bandwidth_tbps": .., "tflops": {dtype: ..}}: the roofline's ceilings


def plan(tasks: list[Task], settings: RunSettings) -> list[Evaluation]:
    """Method-major: the whole suite for the first method (``reference``, the sanity check, first), then the next."""
    evaluations = []
    for method_name, options in settings.methods.items():
        for task in tasks:
            produce = METHODS.get(options["kind"])
            try:
                candidate = produce(task, options)
                missing = ""
            except MethodUnavailable as exc:
                candidate, missing = None, str(exc)
            key = f"{method_name}|{task.task_id}|{task.content_hash}|{candidate.content_hash if candidate else missing}"
            eval_id = hashlib.sha256(key.encode()).hexdigest()[:16]
            evaluations.append(Evaluation(eval_id, task, method_name, candidate, missing))
    return evaluations


def _shapes_for(task: Task, wanted: list[str]) -> list[str]:
    present = [name for name in wanted if name in task.shapes]
    return present or [task.shape_names()[0]]


def _timed_shape(task: Task, wanted: str) -> str:
    return wanted if wanted in task.shapes else task.shape_names()[-1]


class Orchestrator:
    def __init__(
        self,
        settings: RunSettings,
        run_dir: RunDir,
        executor: Executor,
        sink: MlflowSink | None,
        console: Console,
        git_commit: str,
        warmup_executor: Executor | None = None,
    ) -> None:
        self.settings = settings
        self.git_commit = git_commit
        self.warmup_executor = warmup_executor
        self.warmup_s = 0.0
        self._last_holder = None
        self.run_dir = run_dir
        self.executor = executor
        self.sink = sink
        self.console = console
        self.journal = Journal(run_dir.path / "journal.jsonl")

    # -- job preparation -------------------------------------------------------------------
    def _prepare_job(self, evaluation: Evaluation, root: Path | None = None, mode: str = "evaluate") -> Path:
        s = self.settings
        task = evaluation.task
        job_dir = (root or self.run_dir.path / "jobs") / evaluation.eval_id
        if job_dir.exists():
            shutil.rmtree(job_dir)  # a half-done attempt from before a kill
        (job_dir / OUT_DIR).mkdir(parents=True)
        shutil.copyfile(task.path, job_dir / TASK_FILE)
        candidate_store = self.run_dir.path / "candidates"
        candidate_store.mkdir(exist_ok=True)
        digest = evaluation.candidate.content_hash.split(":", 1)[1]
        stored = candidate_store / f"{digest}.py"
        if not stored.exists():
            stored.write_text(evaluation.candidate.source)
        shutil.copyfile(stored, job_dir / CANDIDATE_FILE)
        job = {
            "protocol": PROTOCOL_VERSION,
            "eval_id": evaluation.eval_id,
            "mode": mode,
            "task": task.to_job(),
            "candidate_hash": evaluation.candidate.content_hash,
            "device": "cuda:0" if s.device == "cuda" else "cpu",
            "seed": s.seed,
            "trials": s.trials,
            "check_shapes": _shapes_for(task, s.check_shapes),
            "timed_shape": _timed_shape(task, s.timed_shape),
            "timing": s.timing,
            "peaks": s.peaks,
            "integrity_policy": s.methods[evaluation.method]["integrity_policy"],
            "threads": s.cpu_threads,
            "meta": self._job_meta(evaluation),
        }
        write_json_atomic(job_dir / JOB_FILE, job)
        for path in (job_dir / TASK_FILE, job_dir / CANDIDATE_FILE, job_dir / JOB_FILE):
            path.chmod(0o444)
        return job_dir

    def _job_meta(self, evaluation: Evaluation) -> dict:
        s = self.settings
        return {
            "method": evaluation.method,
            "model": s.model,
            "suite": s.suite,
            "hardware": s.hardware,
            "executor": s.executor,
            "provenance": evaluation.candidate.provenance if evaluation.candidate else {},
            "flops": evaluation.task.flops,
            "bytes": evaluation.task.bytes,
        }

    # -- one evaluation --------------------------------------------------------------------
    def _execute(self, evaluation: Evaluation) -> tuple[Path, Result]:
        s = self.settings
        if evaluation.candidate is None:
            job_dir = self.run_dir.path / "jobs" / evaluation.eval_id
            (job_dir / OUT_DIR).mkdir(parents=True, exist_ok=True)
            write_json_atomic(
                job_dir / JOB_FILE,
                {
                    "protocol": PROTOCOL_VERSION,
                    "eval_id": evaluation.eval_id,
                    "task": evaluation.task.to_job(),
                    "meta": self._job_meta(evaluation),
                },
            )
            result = Result(
                evaluation.eval_id,
                evaluation.task.task_id,
                evaluation.task.content_hash,
                "",
                Verdict("compile_error", "missing_candidate", evaluation.missing_reason, "plan"),
                started_at=time.time(),
                finished_at=time.time(),
            )
            write_json_atomic(job_dir / OUT_DIR / RESULT_FILE, result.to_dict())
            return job_dir, result
        job_dir = self._prepare_job(evaluation)
        gpu_index, gpu_id, lock_key, before = self._device()
        with device_lock(lock_key, str(self.run_dir.path), on_wait=self._waiting):
            gate = None
            if gpu_index is not None:
                gate = health_gate(gpu_index, s.max_temperature_c, self.executor.own_pids())
                if not gate.ok:
                    self.console.print(f"[yellow]GPU health gate: {'; '.join(gate.problems)} (proceeding, recorded)")
            outcome = self.executor.run(job_dir, gpu_id)
            after = read_gpu(gpu_index) if gpu_index is not None else before
        result = self._collect(job_dir, evaluation, outcome)
        result.environment["executor"] = self.executor.environment()
        result.environment["gpu_before"] = gate.reading if gate else before
        result.environment["gpu_after"] = after
        if gate:
            result.environment["health_gate"] = {"ok": gate.ok, "waited_s": gate.waited_s, "problems": gate.problems}
        result.environment["sandbox"] = {
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "timed_out": outcome.timed_out,
            "wall_s": outcome.wall_s,
            "output_truncated": outcome.output_truncated,
        }
        write_json_atomic(job_dir / OUT_DIR / RESULT_FILE, result.to_dict())
        return job_dir, result

    def _device(self) -> tuple[int | None, str | None, str, dict]:
        """The GPU index, the id the sandbox is pinned to, the lock key, and an NVML reading."""
        if self.settings.device != "cuda":
            return None, None, "cpu-host", {"available": False, "why": "CPU run"}
        index = self.settings.gpus[0]
        reading = read_gpu(index)
        if reading.get("available"):
            return index, reading["uuid"], f"gpu-{reading['uuid']}", reading
        return index, str(index), f"gpu-index-{index}", reading

    def _warmup_chunk(self) -> int:
        return max(1, 4 * self.settings.warmup_workers)

    def _warm_up(self, todo: list[Evaluation]) -> None:
        """Compile warm-up: run non-reference candidates once, in parallel, to fill the compile caches.

        It holds the device lock (nothing else measures meanwhile) and judges nothing; every
        evaluation is then measured from scratch in a fresh process that finds warm caches.
        """
        workers = self.settings.warmup_workers
        targets = [
            e for e in todo if e.candidate is not None and self.settings.methods[e.method]["kind"] != "reference"
        ]
        if self.warmup_executor is None or workers < 1 or not targets:
            return
        _, gpu_id, lock_key, _ = self._device()
        root = self.run_dir.path / "warmup"
        started = time.perf_counter()
        self.console.print(f"compile warm-up: {len(targets)} candidates, {workers} at a time")
        with device_lock(lock_key, str(self.run_dir.path), on_wait=self._waiting):
            with ThreadPoolExecutor(workers) as pool:
                outcomes = list(
                    pool.map(lambda e: self.warmup_executor.run(self._prepare_job(e, root, "warmup"), gpu_id), targets)
                )
        shutil.rmtree(root, ignore_errors=True)
        elapsed = time.perf_counter() - started
        self.warmup_s += elapsed
        failed = sum(1 for outcome in outcomes if outcome.exit_code != 0)
        self.console.print(
            f"compile warm-up done in {elapsed:.0f} s ({failed} failed there; their evaluations say why)"
        )

    def _waiting(self, holder: dict) -> None:
        """Say once per holder (not once per poll) whom this run waits for."""
        key = (holder.get("pid"), holder.get("run"))
        if key == self._last_holder:
            return
        self._last_holder = key
        self.console.print(
            f"waiting for the device lock, held by pid {holder.get('pid', '?')} "
            f"on {holder.get('host', '?')} for run {holder.get('run', '?')}"
        )

    def _collect(self, job_dir: Path, evaluation: Evaluation, outcome) -> Result:
        out = job_dir / OUT_DIR
        result_path = out / RESULT_FILE
        if result_path.exists():
            try:
                return Result.from_dict(json.loads(result_path.read_text()))
            except (json.JSONDecodeError, TypeError, KeyError, ValueError):
                pass  # a torn or forged file: decide from how the sandbox ended
        stage = (out / STAGE_FILE).read_text().strip() if (out / STAGE_FILE).exists() else "start"
        stderr = _tail(out / "stderr.log")
        if outcome.timed_out:
            verdict = Verdict("timeout", "wall_time", f"killed after {outcome.wall_s:.0f} s in stage {stage}", stage)
        elif stage in _HARNESS_STAGES or outcome.exit_code == 3:
            verdict = Verdict(
                "infra_error", "harness_failed", f"the worker died before the candidate ran: {stderr}", stage
            )
        else:
            how = (
                f"signal {signal.Signals(outcome.signal).name}" if outcome.signal else f"exit code {outcome.exit_code}"
            )
            verdict = Verdict(
                "runtime_error",
                "crashed",
                f"the sandbox ended with {how} in stage {stage} without a result: {stderr}",
                stage,
            )
        return Result(
            evaluation.eval_id,
            evaluation.task.task_id,
            evaluation.task.content_hash,
            evaluation.candidate.content_hash,
            verdict,
            started_at=time.time() - outcome.wall_s,
            finished_at=time.time(),
        )

    # -- the sweep -------------------------------------------------------------------------
    def run(self, evaluations: list[Evaluation], parent_run_id: str | None) -> None:
        state = self.journal.read()
        todo = [e for e in evaluations if e.eval_id not in state.results]
        done = len(evaluations) - len(todo)
        if done:
            self.console.print(f"resuming: {done} of {len(evaluations)} evaluations already done")
        self._log_unlogged(evaluations, state, parent_run_id)
        with RunProgress(len(evaluations), done, self.console, enabled=self.settings.progress) as progress:
            for position, evaluation in enumerate(todo):
                if position % self._warmup_chunk() == 0:
                    # Warm the next chunk only: a run stopped midway loses at most one chunk of warm-up.
                    self._warm_up(todo[position : position + self._warmup_chunk()])
                label = f"{evaluation.method} · {evaluation.task.task_id}"
                progress.working_on(label)
                job_dir, result = self._execute(evaluation)
                self.journal.append(
                    {
                        "event": "result",
                        "eval_id": evaluation.eval_id,
                        "verdict": result.verdict.status,
                        "method": evaluation.method,
                        "task_id": evaluation.task.task_id,
                    }
                )
                progress.finished(result, label)
                self._log(job_dir, result, parent_run_id)

    def _log_unlogged(self, evaluations: list[Evaluation], state, parent_run_id: str | None) -> None:
        if self.sink is None or parent_run_id is None:
            return
        for evaluation in evaluations:
            if evaluation.eval_id in state.results and evaluation.eval_id not in state.logged:
                job_dir = self.run_dir.path / "jobs" / evaluation.eval_id
                result = Result.from_dict(json.loads((job_dir / OUT_DIR / RESULT_FILE).read_text()))
                self._log(job_dir, result, parent_run_id)

    def _log(self, job_dir: Path, result: Result, parent_run_id: str | None) -> None:
        if self.sink is None or parent_run_id is None:
            return
        record = child_record(job_dir, result, self.git_commit)
        try:
            child = self.sink.log_child(
                parent_run_id,
                record.run_name,
                record.params,
                record.metrics,
                record.tags,
                record.series,
                record.artifacts,
            )
        except SinkError as exc:
            self.console.print(f"[red]MLflow: {exc}; the result is on disk and will be logged on resume")
            return
        self.journal.append({"event": "logged", "eval_id": result.eval_id, "mlflow_run_id": child})


def _tail(path: Path, limit: int = 1500) -> str:
    if not path.exists():
        return ""
    data = path.read_bytes()[-limit:]
    return data.decode(errors="replace").strip()
