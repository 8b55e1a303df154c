"""One evaluation inside the sandbox: static screen, reference, candidate, timing.

The static screen (``runner/static_check.py``, under the method's integrity policy) runs first,
on the source alone. Every later phase may run device work and holds the device's token
(``device_token.py``): shared while it only computes and checks (evaluations in flight do that
side by side), exclusive for the timed samples, so a measurement never shares the GPU. Order matters:
the reference outputs for every checked shape and trial are computed before the candidate
file is imported, so nothing the candidate does at import time can change them (kbench's own
``torch_compile`` candidate, the task's file and a class compiling its Model, checked character for
character, may be imported and compiled before, off the token: ``correctness.preload_own_candidate``). Then the
candidate is imported (failure: ``compile_error``), built from the same seed as the reference,
and run on fresh seeded inputs for every trial of every shape, with the allocator poisoned
before each call (exception: ``runtime_error``; wrong value, shape or dtype: ``incorrect``; a
runtime integrity check: ``integrity_violation``). A trial's checks are queued behind its call and judged
after the synchronisation before the next trial's call, which their results have passed by then
(``host_reads.py``), so each trial waits for the device twice, not once per check. A correct candidate is timed against the
reference on the timed shape, inputs rotating among several sets drawn from a seed picked only
then (so the candidate cannot have precomputed their answers); then the stream audit, the
roofline (``faster_than_physics``) and the output of the last timed call (tolerance, then the
float64 precision bound on its inputs) are judged. The
result is written atomically; a ``stage`` marker lets the orchestrator say where a crashed
worker died.

This module runs the job (its process, the screen, the token, the result); the stages are in ``correctness.py``
(the reference's outputs, the candidate's import, its checked calls) and ``timed_stage.py`` (the timed pair and the
checks after it), with what they share in ``stages.py``.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path

import torch

from runner.static_check import StaticReport, screen_candidate
from runner.worker.autotuning import read_autotuning
from runner.worker.context_exit import ContextNotReset, reset_cuda_context
from runner.worker.correctness import Imported, check_calls, import_candidate, preload_own_candidate, reference_outputs
from runner.worker.device_token import ISOLATE_DEVICE, SHARED, TOKEN_ENV, DeviceToken
from runner.worker.environment import worker_environment
from runner.worker.memory import out_of_memory
from runner.worker.memory_release import release_device_memory, settles
from runner.worker.preload import preload_reference_kernels
from runner.worker.prewarm import spare_record, start_spare, write_spare_record
from runner.worker.protocol import (
    CANDIDATE_FILE,
    CANDIDATE_MODULE,
    OUT_DIR,
    RESULT_FILE,
    SAMPLES_FILE,
    STAGE_FILE,
    TAKEN_FILE,
    TASK_FILE,
    ProtocolError,
    Result,
    Verdict,
    read_job,
    write_json_atomic,
)
from runner.worker.stages import CheckCost, StageClock, Stop, checked_shapes, failure, note_release, seed_of_trial
from runner.worker.timed_stage import checks_after_timing, time_pair
from runner.worker.warmup import warm_up


def main(argv: list[str]) -> int:
    """``JOB_DIR``, or ``--wait``: start now (imports, CUDA context), read JOB_DIR from stdin later."""
    if argv == ["--wait"]:
        start_spare(sys.stdin)
        write_spare_record()  # kept by the executor where the spare is dismissed without a job
        line = sys.stdin.readline().strip()
        if not line:
            _end_cuda_context()  # a spare's: not torn down by the exit, which stalls the GPU
            return 4  # dismissed without a job
        argv = [line]
    if len(argv) != 1:
        print("usage: python -m runner.worker JOB_DIR | --wait", file=sys.stderr)
        return 2
    job_dir = Path(argv[0]).resolve()
    try:
        job = read_job(job_dir)
    except ProtocolError as exc:
        print(f"kbench worker: {exc}", file=sys.stderr)
        return 3
    os.chdir(job_dir / OUT_DIR)
    (job_dir / OUT_DIR / TAKEN_FILE).write_text(f"{time.time():.6f}\n")
    # What the process made before its job (the imports, a spare's CUDA context and pre-warm: about 616,000 objects
    # on the H100) is frozen: the job's collections scan only the job's own objects (a full one over torch's stack:
    # 85 ms, this machine), and forked workers leave the server's pages shared.
    gc.freeze()
    if job.get("mode") == "warmup":
        (job_dir / OUT_DIR / STAGE_FILE).write_text("warmup")  # the executor's time limit counts from here
        code = warm_up(job, job_dir, seed_of_trial)
    else:
        result = evaluate(job, job_dir)
        write_json_atomic(job_dir / OUT_DIR / RESULT_FILE, result.to_dict())
        code = 0
    # The result is on disk (fsynced). The CUDA context is reset before the exit, which would otherwise stall the
    # whole GPU for 13-24 ms, most often inside the next evaluation's measurement (context_exit.py). Skip interpreter
    # teardown: with torch.compile's worker pools and a CUDA context it takes seconds and can hang, and nothing after
    # this point matters.
    _end_cuda_context()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _end_cuda_context() -> None:
    """Reset this worker's CUDA context before it exits (context_exit.py); where the driver cannot, say so in the
    stderr log (the result is on disk already) and let the exit tear it down."""
    try:
        reset_cuda_context()
    except ContextNotReset as exc:
        print(f"kbench worker: CUDA context not reset ({exc}); the exit tears it down", file=sys.stderr)


def evaluate(job: dict, job_dir: Path) -> Result:
    out_dir = job_dir / OUT_DIR
    task = job["task"]
    device = torch.device(job["device"])
    if job.get("threads"):
        torch.set_num_threads(int(job["threads"]))
    result = Result(
        eval_id=job["eval_id"],
        task_id=task["task_id"],
        task_hash=task["content_hash"],
        candidate_hash=job["candidate_hash"],
        verdict=Verdict("correct"),
        started_at=time.time(),
    )
    clock = StageClock(out_dir, result.stage_seconds)
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        result.environment = worker_environment(device)
        result.environment.update(spare_record())  # what it paid before the job (runner/worker/prewarm.py)
        screened = _screen(job, job_dir, result)
        cost = CheckCost(result.integrity.setdefault("check_seconds", {}), device)
        # Everything from here on may run work on the device: it holds the device's token, shared
        # until the timed samples, which take it exclusive. The stage marker (from which the
        # executors count the time limit) appears once the token is held.
        record = result.environment.setdefault("device_token", {})
        isolation = job.get("measurement_isolation", ISOLATE_DEVICE)
        held_back: dict[Path, object] = {}  # files written once the token is let go (host work holds no device)
        try:
            preloaded = None
            if job.get("preload_kernels") and device.type == "cuda":
                # Before the first shared phase, while the measurements queued ahead run: the reference's calls
                # captured, not run (runner/worker/preload.py); then kbench's own compiled candidate's.
                result.environment["preloaded_kernels"] = preload_reference_kernels(
                    job_dir / TASK_FILE, checked_shapes(job), device
                )
            if job.get("preload_candidate") and device.type == "cuda":
                preloaded = preload_own_candidate(job, job_dir, device, result, screened, cost)
            with DeviceToken(os.environ.get(TOKEN_ENV), record, isolation) as token, torch.no_grad():
                token.hold(SHARED)
                stopped = None
                try:
                    _run(job, job_dir, device, result, clock, screened, token, held_back, cost, preloaded)
                except Stop as stop:  # its frames (the timing's tensors) let go, so their memory can be given back
                    stopped = stop.with_traceback(None)
                    stopped.__context__ = stopped.__cause__ = None
                if settles(job):  # given back and cleared while the token is held, not by the exit after it
                    note_release(result, release_device_memory(device, "end"))
                if stopped is not None:
                    raise stopped
        finally:
            cost.settle()
            result.autotuning = read_autotuning(sys.modules.get(CANDIDATE_MODULE))  # host work, the token let go
            for path, data in held_back.items():
                try:
                    write_json_atomic(path, data)
                except OSError as exc:  # the verdict stands (a Stop in flight is not replaced): recorded
                    result.environment.setdefault("not_written", {})[path.name] = str(exc)[:300]
    except Stop as stop:
        result.verdict = stop.verdict
    except Exception as exc:  # out of memory in kbench's own steps (inputs, snapshots, checks): whose was it?
        if out_of_memory(exc) is None:
            raise
        result.verdict = failure("runtime_error", "out_of_memory", exc, clock.stage or "start")
    if device.type == "cuda" and torch.cuda.is_initialized():
        memory = result.environment.setdefault("device_memory_bytes", {})
        memory.update(
            peak_reserved=torch.cuda.max_memory_reserved(device), peak_allocated=torch.cuda.max_memory_allocated(device)
        )
    result.finished_at = time.time()
    clock.mark("done")
    return result


def _screen(job: dict, job_dir: Path, result: Result) -> StaticReport:
    """The static screen (``runner/static_check.py``) under the method's policy: source only, no device work."""
    started = time.perf_counter()
    policy = job.get("integrity_policy", "own_kernels")
    report = screen_candidate((job_dir / CANDIDATE_FILE).read_text(errors="replace"), policy)
    result.stage_seconds["static_check"] = round(time.perf_counter() - started, 6)
    result.integrity = {
        "policy": policy,
        "static_findings": [finding.describe() for finding in report.findings],
        "kernel_launches": report.kernel_launches,
    }
    if report.violation is not None:
        raise Stop(Verdict("integrity_violation", report.violation.reason, report.violation.describe(), "static_check"))
    return report


def _run(
    job: dict,
    job_dir: Path,
    device: torch.device,
    result: Result,
    clock: StageClock,
    screened: StaticReport,
    token: DeviceToken,
    held_back: dict[Path, object],
    cost: CheckCost,
    preloaded: Imported | None,
) -> None:
    """The stages that may run device work, in order, the token held: the reference's outputs
    (``correctness.py``), the candidate's import (done already where ``preloaded``) and its checked calls, then the
    timed pair and the checks after it (``timed_stage.py``). ``Stop`` ends it with a verdict."""
    clock.mark("reference")
    reference = reference_outputs(job, job_dir, device, result, cost)

    clock.mark("import_candidate")
    imported = preloaded or import_candidate(job, job_dir, device, result, screened, cost)

    clock.mark("correctness")
    check_calls(job, device, result, reference, imported, cost, preloaded is not None)
    # The checks' blocks go back to the device: an evaluation waits for its turn holding only its timed set-up, not
    # the cache of its checks, which the others in flight may need (memory_admission.py); with
    # executor.release_under_token, cleared by the driver before any measurement runs (memory_release.py).
    note_release(result, release_device_memory(device, "checks", settle=settles(job)))

    if job.get("timing") is None:
        return
    pair = time_pair(job, device, result, clock, token, reference.module, imported.model_class)
    # Written after the token is let go: the next measurement waits for this evaluation's checks after timing
    # (shared), and a file written meanwhile would be host work it waits for too. A worker killed during
    # those checks (its time limit) leaves no samples file; the result says why it ended.
    held_back[job_dir / OUT_DIR / SAMPLES_FILE] = pair.raw
    clock.mark("checks_after_timing")
    checks_after_timing(job, device, result, pair, reference, cost)
