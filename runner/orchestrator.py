"""Plan → dispatch → collect: the host side of a ``kbench run``.

Plan (``runner/planning.py``): the suite's tasks × the configured methods give candidates (content-addressed
files) and one job directory per evaluation. Dispatch: the run holds the lock of each of its devices
(``hardware.gpus``: one lane per GPU, the evaluations shared among them) for the whole sweep;
per lane, ``executor.in_flight`` evaluations run at once, each passing the NVML health gate
first (which waits out heat and throttling only while none of the others runs there) and
starting once the GPU's memory admits it (``runner/gpu/memory_admission.py``, which also runs
once more an evaluation the others' memory use ran out of memory); the device's token
(``runner/worker/device_token.py``) lets their computing and checking share the GPU but gives
each measurement the GPU alone, while process start,
imports, the static screen, collection and logging overlap. Collect: read
the worker's result, or decide the verdict from how the sandbox ended; journal it; mirror it to
MLflow (all from the main thread). The compile warm-up, before each chunk of the sweep or beside it, is
``runner/compile_warmup.py``'s. A journal makes the run resumable after Ctrl-C or SIGKILL:
finished evaluations are not redone and nothing is logged twice.
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import threading
import time
from collections import deque
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from runner.compile_warmup import CompileWarmup
from runner.executors import Executor
from runner.gpu.lock import device_key, device_lock
from runner.gpu.memory_admission import GIB, RETRY_REASON, MemoryAdmission
from runner.gpu.nvml import health_gate, read_gpu
from runner.planning import Evaluation, job_meta, prepare_job
from runner.progress import RunProgress
from runner.run_settings import RunSettings, lane_gpu_id
from runner.rundir import RunDir, tail_text
from runner.tracking.child_record import child_record
from runner.tracking.journal import Journal
from runner.tracking.mlflow_sink import SinkError
from runner.tracking.opening import Tracking
from runner.worker.protocol import (
    JOB_FILE,
    OUT_DIR,
    PROTOCOL_VERSION,
    RESULT_FILE,
    STAGE_FILE,
    TAKEN_FILE,
    Result,
    Verdict,
    read_stage,
    write_json_atomic,
)

# Stages in which only harness code has run: a crash there is never the candidate's fault.
_HARNESS_STAGES = ("start", "reference")
# Where an evaluation's first try's records are kept when it ran again (``memory_admission.RETRY_REASON``).
FIRST_TRY_DIR = "out.first-try"


class RunAborted(RuntimeError):
    """The run stopped before its end for a reason that is not a candidate's (one line; finished work kept)."""


@dataclass(frozen=True)
class Lane:
    """One device of the run: its NVML index, the id its sandboxes are pinned to (UUID, or the index
    where NVML cannot say), and the NVML reading taken when the run started."""

    index: int | None
    gpu_id: str | None
    reading: dict

    @property
    def lock_key(self) -> str:
        return device_key(self.gpu_id)


class Orchestrator:
    def __init__(
        self,
        settings: RunSettings,
        run_dir: RunDir,
        executor: Executor,
        tracking: Tracking | None,
        console: Console,
        git_commit: str,
        warmup_executor: Executor | None = None,
    ) -> None:
        self.settings = settings
        self.git_commit = git_commit
        self._last_holder = None
        self.run_dir = run_dir
        self.executor = executor
        # MLflow's sink and parent run, waited for when a result is first logged (runner/tracking/opening.py).
        self.tracking = tracking
        self.console = console
        self.journal = Journal(run_dir.path / "journal.jsonl")
        self._admissions: dict[int, MemoryAdmission] = {}  # per GPU lane, made when the sweep knows its lanes
        self._running_count: dict[int | None, int] = {}  # per lane, the evaluations running there now
        self._running_lock = threading.Lock()
        self.compile_warmup = CompileWarmup(
            settings,
            run_dir.path,
            warmup_executor,
            console,
            self._prepare_job,
            self._running,
            lambda lane: self._admissions.get(lane.index),
        )

    @property
    def warmup_s(self) -> float:
        """The compile warm-ups before the sweeps, summed (s)."""
        return self.compile_warmup.warmup_s

    @property
    def warmup_beside(self) -> dict | None:
        """The compile warm-up beside the sweep's summary (``WarmupBeside.summary``; None where none ran)."""
        return self.compile_warmup.beside_summary

    def _prepare_job(self, evaluation: Evaluation, root: Path | None = None, mode: str = "evaluate") -> Path:
        """``planning.prepare_job`` for this run's settings and directory."""
        return prepare_job(self.settings, self.run_dir.path, evaluation, root, mode)

    # -- one evaluation --------------------------------------------------------------------
    def _execute(self, evaluation: Evaluation, lane: Lane) -> tuple[Path, Result]:
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
                    "meta": job_meta(self.settings, evaluation),
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
        # When the slot got to each step (epoch seconds), for where a slot's time goes (``runner.bench duty``).
        slot = {"taken": time.time()}
        job_dir = self._prepare_job(evaluation)
        slot["prepared"] = time.time()
        gate = None
        if lane.index is not None:
            gate = health_gate(
                lane.index, s.max_temperature_c, self.executor.own_pids(), s.cooldown_limit_s, self._running_on(lane)
            )
            if not gate.ok:
                problems = "; ".join(gate.problems)
                if s.on_unhealthy == "fail":
                    shutil.rmtree(job_dir, ignore_errors=True)  # not run: a resume runs it
                    raise RunAborted(
                        f"GPU {lane.index} failed the health gate after {gate.waited_s:.0f} s of cooldown: {problems} "
                        "(hardware.on_unhealthy=fail; finished evaluations are kept, the same command resumes)"
                    )
                self.console.print(f"[yellow]GPU {lane.index} health gate: {problems} (proceeding, recorded)")
        before = gate.reading if gate else lane.reading
        slot["gated"] = time.time()
        admission = self._admissions.get(lane.index)
        outcome, result, admitted = self._run_admitted(job_dir, evaluation, lane, admission, slot=slot)
        if admission is not None and (result.verdict.status, result.verdict.reason) == ("infra_error", RETRY_REASON):
            # Out of memory because the others in flight held it: once more, when half the GPU is free, none starting beside.
            first = {"verdict": asdict(result.verdict), "admission": admitted, "records": FIRST_TRY_DIR}
            shutil.rmtree(job_dir / FIRST_TRY_DIR, ignore_errors=True)
            (job_dir / OUT_DIR).rename(job_dir / FIRST_TRY_DIR)
            (job_dir / OUT_DIR).mkdir()
            slot["first_try"] = {"admitted": slot["admitted"], "ran": slot["ran"]}
            outcome, result, admitted = self._run_admitted(
                job_dir, evaluation, lane, admission, admission.retry_needs(), slot, second_try=True
            )
            admitted["first_try"] = first
        slot["collected"] = time.time()
        after = read_gpu(lane.index) if lane.index is not None else before
        slot["read_after"] = time.time()
        if admitted:
            result.environment["memory_admission"] = admitted
        result.environment["executor"] = self.executor.environment()
        result.environment["gpu_before"] = before
        result.environment["gpu_after"] = after
        result.environment["lane"] = {"gpu": lane.index, "lock": lane.lock_key, "in_flight": s.in_flight, "slot": slot}
        if gate:
            result.environment["health_gate"] = {
                "ok": gate.ok,
                "waited_s": gate.waited_s,
                "waited_for": gate.waited_for,
                "problems": gate.problems,
                "others_running": gate.others_running,
                "ended_while_read": gate.ended,
            }
        result.environment["sandbox"] = {
            "exit_code": outcome.exit_code,
            "signal": outcome.signal,
            "timed_out": outcome.timed_out,
            "wall_s": outcome.wall_s,
            "output_truncated": outcome.output_truncated,
            **outcome.environment,  # the executor's own: a container's id, how a local worker was started
        }
        write_json_atomic(job_dir / OUT_DIR / RESULT_FILE, result.to_dict())
        return job_dir, result

    def _run_admitted(
        self,
        job_dir: Path,
        evaluation: Evaluation,
        lane: Lane,
        admission,
        needed: int | None = None,
        slot=None,
        second_try: bool = False,
    ):
        """The evaluation in its sandbox, started once the GPU's memory admits it (``memory_admission.py``; a
        ``second_try`` before and without the others); ``slot`` gets when it was admitted and when the sandbox ended."""
        record: dict = {}
        slot = {} if slot is None else slot
        # A promise counts from when the worker takes the job: at a run's start that waits for the fork server's imports.
        # (Not from its first stage, which waits for the device's token: newcomers held at the ready gate then
        # kept their promises, and cohorts gathered 4 instead of 7; BENCHMARKS.md, twenty-ninth session.)
        began = (job_dir / OUT_DIR / TAKEN_FILE).exists
        admitting = admission.admitted(needed, record, began, second_try) if admission is not None else nullcontext()
        with admitting, self._running(lane):
            slot["admitted"] = time.time()
            outcome = self.executor.run(job_dir, lane.gpu_id)
            slot["ran"] = time.time()
        return outcome, self._collect(job_dir, evaluation, outcome), record

    @contextmanager
    def _running(self, lane: Lane):
        """The evaluation runs on ``lane`` for the block (counted for the health gate)."""
        with self._running_lock:
            self._running_count[lane.index] = self._running_count.get(lane.index, 0) + 1
        try:
            yield
        finally:
            with self._running_lock:
                self._running_count[lane.index] -= 1

    def _running_on(self, lane: Lane) -> int:
        """How many of the run's evaluations run on ``lane`` now."""
        with self._running_lock:
            return self._running_count.get(lane.index, 0)

    def _lanes(self) -> list[Lane]:
        """One lane per configured GPU (each pinned by UUID where NVML answers), or the host for a CPU run."""
        if self.settings.device != "cuda":
            return [Lane(None, None, {"available": False, "why": "CPU run"})]
        lanes = []
        for index in self.settings.gpus:
            reading = read_gpu(index)
            lanes.append(Lane(index, lane_gpu_id(index, reading), reading))
        return lanes

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
        stage = read_stage(out / STAGE_FILE) or "start"
        stderr = tail_text(out / "stderr.log")
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
    def run(self, evaluations: list[Evaluation]) -> None:
        state = self.journal.read()
        todo = [e for e in evaluations if e.eval_id not in state.results]
        done = len(evaluations) - len(todo)
        if done:
            self.console.print(f"resuming: {done} of {len(evaluations)} evaluations already done")
        self._log_unlogged(evaluations, state)
        lanes = self._lanes()
        if self.settings.admit_free_gib > 0:
            self._admissions = {
                lane.index: MemoryAdmission(lane.index, int(self.settings.admit_free_gib * GIB))
                for lane in lanes
                if lane.index is not None
            }
        with RunProgress(len(evaluations), done, self.console, enabled=self.settings.progress) as progress:
            with ExitStack() as held:
                # Always in the same order: two runs asking for the same GPUs cannot each hold one and wait.
                for lane in sorted(lanes, key=lambda lane: lane.lock_key):
                    held.enter_context(device_lock(lane.lock_key, str(self.run_dir.path), on_wait=self._waiting))
                for chunk in self.compile_warmup.chunks(todo, lanes):
                    if self.settings.warmup_beside:
                        with self.compile_warmup.beside(chunk, lanes) as beside:
                            self._sweep(chunk, lanes, progress, beside)
                    else:
                        self.compile_warmup.before(chunk, lanes)
                        self._sweep(chunk, lanes, progress)

    def _sweep(self, todo: list[Evaluation], lanes: list[Lane], progress: RunProgress, beside=None) -> None:
        """``in_flight`` dispatch threads per lane take evaluations in plan order; this thread collects.

        Journal, progress and MLflow stay on this thread. A failure that is not a candidate's (the
        engine gone, a failed health gate, Ctrl-C) stops the dispatch; evaluations already running
        finish and are journalled before the failure is raised.
        """
        pending = deque(todo)
        taken = threading.Lock()
        events: queue.Queue = queue.Queue()
        stop = threading.Event()

        def dispatch(lane: Lane) -> None:
            while not stop.is_set():
                with taken:
                    if not pending:
                        return
                    evaluation = pending.popleft()
                    if beside is not None:
                        beside.coming(pending)  # the next ones' warm-ups: needed soon
                if beside is not None and not beside.wait_for(evaluation, stop):
                    return  # stopped while its warm-up ran: not started, a resume runs it
                events.put(("start", evaluation, None))
                try:
                    events.put(("done", evaluation, self._execute(evaluation, lane)))
                except BaseException as exc:  # raised again on the main thread
                    events.put(("failed", evaluation, exc))
                    return

        threads = [
            threading.Thread(target=dispatch, args=(lane,), name=f"lane-{lane.lock_key}-{slot}", daemon=True)
            for lane in lanes
            for slot in range(max(1, self.settings.in_flight))
        ]
        for thread in threads:
            thread.start()
        failure: BaseException | None = None
        running: dict[str, str] = {}
        try:
            while any(thread.is_alive() for thread in threads) or not events.empty():
                try:
                    kind, evaluation, payload = events.get(timeout=0.2)
                except queue.Empty:
                    continue
                label = f"{evaluation.method} · {evaluation.task.task_id}"
                if kind == "start":
                    running[evaluation.eval_id] = label
                elif kind == "failed":
                    running.pop(evaluation.eval_id, None)
                    stop.set()
                    failure = failure or payload
                else:
                    running.pop(evaluation.eval_id, None)
                    self._record(evaluation, *payload, progress, label)
                progress.working_on(", ".join(running.values()) or "collecting")
        except KeyboardInterrupt:
            stop.set()  # the sandboxes die with this process; finished results are journalled
            raise
        if failure is not None:
            raise failure

    def _record(self, evaluation: Evaluation, job_dir: Path, result: Result, progress, label) -> None:
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
        self._log(job_dir, result)

    def _log_unlogged(self, evaluations: list[Evaluation], state) -> None:
        unlogged = [e for e in evaluations if e.eval_id in state.results and e.eval_id not in state.logged]
        if self.tracking is None or not unlogged:
            return  # nothing to wait for MLflow for
        for evaluation in unlogged:
            job_dir = self.run_dir.path / "jobs" / evaluation.eval_id
            result = Result.from_dict(json.loads((job_dir / OUT_DIR / RESULT_FILE).read_text()))
            self._log(job_dir, result)

    def _log(self, job_dir: Path, result: Result) -> None:
        if self.tracking is None:
            return
        sink, parent_run_id = self.tracking.wait()
        if sink is None or parent_run_id is None:
            return
        record = child_record(job_dir, result, self.git_commit)
        try:
            child = sink.log_child(
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
