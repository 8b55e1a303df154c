"""One evaluation inside the sandbox: static screen, reference, candidate, timing.

The static screen (``runner/static_check.py``, under the method's integrity policy) runs first,
on the source alone. Every later phase may run device work and holds the device's token
(``device_token.py``): shared while it only computes and checks (evaluations in flight do that
side by side), exclusive for the timed samples, so a measurement never shares the GPU. Order matters:
the reference outputs for every checked shape and trial are computed before the candidate
file is imported, so nothing the candidate does at import time can change them (kbench's own
``torch_compile`` candidate, the task's file and a class compiling its Model, checked character for
character, may be imported and compiled before, off the token: ``_preload_own_candidate``). Then the
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
"""

from __future__ import annotations

import gc
import os
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import torch

from runner.analysis.roofline import roofline_for
from runner.methods.torch_compile import is_compiled_source
from runner.static_check import StaticReport, screen_candidate
from runner.worker.autotuning import read_autotuning
from runner.worker.compare import queue_comparison
from runner.worker.context_exit import ContextNotReset, reset_cuda_context
from runner.worker.device_token import EXCLUSIVE, ISOLATE_DEVICE, SHARED, TOKEN_ENV, WAIT_STAGE, DeviceToken
from runner.worker.environment import worker_environment
from runner.worker.input_offsets import InputOffsets
from runner.worker.integrity import (
    ThreadCensus,
    changed_flags,
    numerics_flags,
    poison_allocator,
    queue_call_violation,
    restore_numerics_flags,
    snapshot_inputs,
    unjoined_work,
)
from runner.worker.kernel_census import KernelCensus
from runner.worker.loading import as_output_list, build_model, import_file, make_inputs
from runner.worker.memory import causes, others_took_it, out_of_memory
from runner.worker.memory_release import release_device_memory, settles
from runner.worker.placements import PlacementMaker, TimedSide, timing_inputs, weight_copies
from runner.worker.precision import float64_references
from runner.worker.preload import dynamo_graphs, preload_candidate_kernels, preload_reference_kernels
from runner.worker.prewarm import spare_record, start_spare
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
    TimingSettings,
    Trial,
    Verdict,
    read_job,
    write_json_atomic,
)
from runner.worker.timing import GpuThrottled, instruments, measure_pair
from runner.worker.warmup import warm_up

# The stages in which no code of the candidate has run yet.
_BEFORE_THE_CANDIDATE = ("start", "reference")
_COMPILE_ERROR_TYPES = ("CompilationError", "BackendCompilerFailed", "InductorError", "CompileError")


class _Stop(Exception):
    """Ends the evaluation early with a verdict."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def main(argv: list[str]) -> int:
    """``JOB_DIR``, or ``--wait``: start now (imports, CUDA context), read JOB_DIR from stdin later."""
    if argv == ["--wait"]:
        start_spare(sys.stdin)
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
        code = warm_up(job, job_dir, _trial_seed)
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
    clock = _StageClock(out_dir, result.stage_seconds)
    try:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        result.environment = worker_environment(device)
        result.environment.update(spare_record())  # what it paid before the job (runner/worker/prewarm.py)
        screened = _screen(job, job_dir, result)
        cost = _CheckCost(result.integrity.setdefault("check_seconds", {}), device)
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
                    job_dir / TASK_FILE, _checked_shapes(job), device
                )
            if job.get("preload_candidate") and device.type == "cuda":
                preloaded = _preload_own_candidate(job, job_dir, device, result, screened, cost)
            with DeviceToken(os.environ.get(TOKEN_ENV), record, isolation) as token, torch.no_grad():
                token.hold(SHARED)
                stopped = None
                try:
                    _run(job, job_dir, device, result, clock, screened, token, held_back, cost, preloaded)
                except _Stop as stop:  # its frames (the timing's tensors) let go, so their memory can be given back
                    stopped = stop.with_traceback(None)
                    stopped.__context__ = stopped.__cause__ = None
                if settles(job):  # given back and cleared while the token is held, not by the exit after it
                    _note_release(result, release_device_memory(device, "end"))
                if stopped is not None:
                    raise stopped
        finally:
            cost.settle()
            result.autotuning = read_autotuning(sys.modules.get(CANDIDATE_MODULE))  # host work, the token let go
            for path, data in held_back.items():
                try:
                    write_json_atomic(path, data)
                except OSError as exc:  # the verdict stands (a _Stop in flight is not replaced): recorded
                    result.environment.setdefault("not_written", {})[path.name] = str(exc)[:300]
    except _Stop as stop:
        result.verdict = stop.verdict
    except Exception as exc:  # out of memory in kbench's own steps (inputs, snapshots, checks): whose was it?
        if out_of_memory(exc) is None:
            raise
        result.verdict = _failure("runtime_error", "out_of_memory", exc, clock.stage or "start")
    if device.type == "cuda" and torch.cuda.is_initialized():
        memory = result.environment.setdefault("device_memory_bytes", {})
        memory.update(
            peak_reserved=torch.cuda.max_memory_reserved(device), peak_allocated=torch.cuda.max_memory_allocated(device)
        )
    result.finished_at = time.time()
    clock.mark("done")
    return result


def _note_release(result: Result, released: dict | None) -> None:
    """Keep what ``release_device_memory`` gave back in the result (``environment.device_memory_released``)."""
    if released is not None:
        result.environment.setdefault("device_memory_released", []).append(released)


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
        raise _Stop(
            Verdict("integrity_violation", report.violation.reason, report.violation.describe(), "static_check")
        )
    return report


def _run(
    job: dict,
    job_dir: Path,
    device: torch.device,
    result: Result,
    clock: _StageClock,
    screened: StaticReport,
    token: DeviceToken,
    held_back: dict[Path, object],
    cost: _CheckCost,
    preloaded: _Imported | None,
) -> None:
    task = job["task"]
    seed = int(job["seed"])
    shapes = _checked_shapes(job)
    trials_of = _trials_per_shape(job)
    tolerance = task.get("tolerance")

    clock.mark("reference")
    reference_module = import_file(job_dir / TASK_FILE, "kbench_task")
    expected: dict[tuple[str, int], list] = {}
    for shape_name, dims in shapes.items():
        model = build_model(reference_module.Model, reference_module, dims, device, seed)
        for trial in range(trials_of[shape_name]):
            inputs = make_inputs(reference_module, dims, device, _trial_seed(seed, trial))
            expected[(shape_name, trial)] = as_output_list(model(*inputs))
        del model
    with cost("float64_reference"):
        precision = float64_references(reference_module, shapes, device, seed, _trial_seed(seed, 0), expected)
    result.integrity["precision"] = precision.record

    clock.mark("import_candidate")
    _, model_class, kernels, threads = preloaded or _import_candidate(job, job_dir, device, result, screened, cost)

    clock.mark("correctness")
    graphs = dynamo_graphs()
    for shape_name, dims in shapes.items():
        try:
            candidate = build_model(model_class, reference_module, dims, device, seed)
        except Exception as exc:
            raise _Stop(_failure("runtime_error", "init_failed", exc, "correctness")) from None
        previous_outputs: list = []
        # Each trial's checks are queued behind its call and judged after the next trial's synchronisation before
        # its call (the last one's after the loop): their results are read without a wait (host_reads.py), and no
        # call comes before the verdict on the one before it.
        judge_previous = None
        for trial in range(trials_of[shape_name]):
            trial_seed = _trial_seed(seed, trial)
            inputs = make_inputs(reference_module, dims, device, trial_seed)
            with cost("per_call"):
                snapshots = snapshot_inputs(inputs)
                poison_allocator(expected[(shape_name, trial)])
            if device.type == "cuda":
                # The inputs, their snapshots and the poison are done before the call: a candidate's stream that
                # does not wait for this one must not find them unfinished, nor the profiled call count them.
                torch.cuda.synchronize(device)
            if judge_previous is not None:
                judge_previous()
            try:
                with kernels.watch(shape_name, trial), threads.watch():
                    outputs = as_output_list(candidate(*inputs))
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
            except Exception as exc:
                status = "compile_error" if _is_compile_error(exc) else "runtime_error"
                raise _Stop(_failure(status, "forward_failed", exc, "correctness")) from None
            with cost("per_call"):
                judge_previous = _queue_trial_checks(
                    (shape_name, trial, trial_seed),
                    (inputs, snapshots, outputs, previous_outputs),
                    expected[(shape_name, trial)],
                    (threads, kernels, precision),
                    tolerance,
                    result,
                    cost,
                )
            previous_outputs = outputs  # held, so a fresh output cannot legitimately reuse its memory
        if judge_previous is not None:
            judge_previous()
        del candidate
    if preloaded is not None:  # the preload's compiled code called, or compiled again (then it bought nothing)
        result.environment["preloaded_candidate"]["graphs_compiled_in_correctness"] = dynamo_graphs() - graphs
    expected.clear()
    # The checks' blocks go back to the device: an evaluation waits for its turn holding only its timed set-up, not
    # the cache of its checks, which the others in flight may need (memory_admission.py); with
    # executor.release_under_token, cleared by the driver before any measurement runs (memory_release.py).
    _note_release(result, release_device_memory(device, "checks", settle=settles(job)))

    if job.get("timing") is None:
        return
    clock.mark("timing")
    timed_shape = job["timed_shape"]
    dims = task["shapes"][timed_shape]
    settings = TimingSettings(**job["timing"])
    timed_seed = settings.input_seed if settings.input_seed is not None else _unpredictable_seed()
    # Each placement's large inputs at an offset of its own inside their blocks (input_offsets.py).
    offsets = InputOffsets()
    input_sets, groups = timing_inputs(reference_module, dims, device, timed_seed, settings, offsets)
    # Each placement its own copy of both sides' weights, where they fit (placements.py).
    references, candidates = weight_copies(
        lambda: build_model(reference_module.Model, reference_module, dims, device, seed),
        lambda: build_model(model_class, reference_module, dims, device, seed),
        len(groups),
    )
    reference, candidate = TimedSide(references, input_sets), TimedSide(candidates, input_sets)
    reference.first_calls(groups)
    candidate.first_calls(groups)
    # More placements during the turn where these ones' speedups call for them (timing.py); a captured graph replays
    # its one set's addresses.
    grow = None
    if settings.max_placements > len(groups) and not (settings.graphs and device.type == "cuda"):
        grow = PlacementMaker(reference_module, dims, device, timed_seed, groups, [reference, candidate], offsets)
    tools = instruments(device, settings)  # their set-up is no part of the turn
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # the set-up's device work is done before the measurement's turn
    clock.mark(WAIT_STAGE)
    if device.type == "cuda":
        held = torch.cuda.memory_reserved(device)
        result.environment.setdefault("device_memory_bytes", {})["held_waiting_for_turn"] = held
    # Queued for the turn (no newcomer gets in), the warm-up runs beside the shared work still in, never
    # beside a measurement; the samples wait for the turn (f22: the warm-up took 39 ms of each turn,
    # median, while the turn waited 21 ms for the last one's checks after timing: BENCHMARKS.md).
    token.approach()
    clock.mark("timing")

    def take_turn() -> None:
        clock.mark(WAIT_STAGE)
        token.hold(EXCLUSIVE)
        clock.mark("timing")

    try:
        timing, raw = measure_pair(
            [reference.rotation(group, placement) for placement, group in enumerate(groups)],
            [candidate.rotation(group, placement) for placement, group in enumerate(groups)],
            device,
            settings,
            timed_shape,
            seed,
            tools=tools,
            turn=take_turn,
            grow=grow,
        )
    except GpuThrottled as exc:  # the GPU's fault, not the candidate's: no verdict on its speed
        raise _Stop(Verdict("infra_error", "gpu_throttled", str(exc)[:500], "timing")) from None
    except Exception as exc:
        raise _Stop(_failure("runtime_error", "timing_failed", exc, "timing")) from None
    finally:
        token.hold(SHARED)
    timing.input_sets = len(groups[0])
    timing.weight_copies = len(references)
    timing.input_seed = timed_seed
    result.timing = timing
    moved = offsets.record()
    if moved is not None:
        result.environment["input_offsets"] = moved
    # Written after the token is let go: the next measurement waits for this evaluation's checks after timing
    # (shared), and a file written meanwhile would be host work it waits for too. A worker killed during
    # those checks (its time limit) leaves no samples file; the result says why it ended.
    held_back[job_dir / OUT_DIR / SAMPLES_FILE] = raw
    clock.mark("checks_after_timing")
    checks = result.integrity.setdefault("runtime_checks", [])
    checks += ["timed_output", "sync_audit"] if device.type == "cuda" else ["timed_output"]
    evidence = unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, timing.audit_recheck)
    if evidence:
        raise _Stop(Verdict("integrity_violation", "unjoined_stream_work", evidence, "timing"))
    roofline = roofline_for(task, dims, job.get("peaks")) if device.type == "cuda" else None
    if roofline is not None:
        result.roofline = {
            **roofline.to_dict(),
            "reference": roofline.achieved(timing.reference.median_ms),
            "candidate": roofline.achieved(timing.candidate.median_ms),
        }
        impossible = roofline.impossible(timing.candidate.median_ms) if timing.cache == "cold" else None
        if impossible:
            raise _Stop(Verdict("integrity_violation", "faster_than_physics", impossible, "timing"))
    # The output of the last timed call, against the reference on the same inputs; then one more
    # call after new values are written into that input set in place (same addresses), so a
    # result cached by input pointer is stale; both on the copy of the candidate that made that call (any
    # reference copy gives the reference's answer: the same weights). The next measurement waits for these
    # checks: both comparisons are queued and read at the end, one wait for the device instead of one each,
    # the verdicts in the same order.
    index, timed_outputs, last_copy = candidate.last
    with cost("timed_output"):
        expected_last = as_output_list(references[0](*input_sets[index]))
        timed_judge = _queue_timed_check(expected_last, timed_outputs, "the last timed call", index, tolerance)
    # Within tolerance; now against the float64 answer on the same inputs (runner/worker/precision.py),
    # so precision kept only for the checked calls or the small shapes does not pass.
    with cost("float64_timed"):
        key = f"{timed_shape} (last timed call)"
        precision.add_timed(key, reference_module, dims, device, seed, input_sets[index], expected_last)
        violation = None
        if precision.prepared(key):  # judged only on outputs within tolerance: the comparison read first
            timed_judge()
            violation = precision.judge(key, as_output_list(timed_outputs), checks)
    if violation is not None:
        reason, evidence = violation
        raise _Stop(
            Verdict("integrity_violation", reason, f"the last timed call (input set {index}): {evidence}", "timing")
        )
    with cost("same_addresses"):
        fresh = make_inputs(reference_module, dims, device, timed_seed + 7919)
        for target, source in zip(input_sets[index], fresh):
            if isinstance(target, torch.Tensor):
                target.copy_(source)
        expected = references[0](*fresh)
        again = last_copy(*input_sets[index])
        again_judge = _queue_timed_check(
            expected, again, "a call on new values at the same addresses", index, tolerance
        )
        timed_judge()
        again_judge()


def _queue_trial_checks(at, call, expected: list, censuses, tolerance, result: Result, cost):
    """A checked call's verdicts, their device work queued now: returns the call that judges them in their order
    (the threads, the call's integrity, the kernel census, the comparison, then on trial 0 the float64 answer),
    records the trial and raises ``_Stop`` at the first that fails. ``at``: (shape, trial, seed); ``call``:
    (inputs, snapshots, outputs, previous outputs); ``censuses``: (threads, kernels, precision)."""
    shape_name, trial, trial_seed = at
    inputs, snapshots, outputs, previous_outputs = call
    threads, kernels, precision = censuses
    # The censuses judge what they saw during the call: now, before anything else runs.
    thread_violation, kernel_violation = threads.violation(), kernels.violation()
    call_judged = queue_call_violation(inputs, snapshots, outputs, previous_outputs)
    compared = queue_comparison(expected, outputs, tolerance)

    def judge() -> None:
        with cost("per_call"):
            violation = thread_violation or call_judged() or kernel_violation
        if violation is not None:
            reason, evidence = violation
            raise _Stop(
                Verdict("integrity_violation", reason, f"shape {shape_name}, trial {trial}: {evidence}", "correctness")
            )
        comparison = compared()
        result.trials.append(
            Trial(
                shape_name,
                trial,
                trial_seed,
                comparison.ok,
                comparison.max_abs_error,
                comparison.max_rel_error,
                comparison.reason,
            )
        )
        if not comparison.ok:
            raise _Stop(
                Verdict(
                    "incorrect", "mismatch", f"shape {shape_name}, trial {trial}: {comparison.reason}", "correctness"
                )
            )
        if trial == 0:  # within tolerance; now against the float64 answer (runner/worker/precision.py)
            with cost("per_call"):
                violation = precision.judge(shape_name, outputs, result.integrity.setdefault("runtime_checks", []))
            if violation is not None:
                reason, evidence = violation
                message = f"shape {shape_name}, trial 0: {evidence}"
                raise _Stop(Verdict("integrity_violation", reason, message, "correctness"))

    return judge


class _Imported(NamedTuple):
    """The candidate's module, its ``ModelNew`` and the censuses of its correctness calls (made before its import)."""

    module: ModuleType
    model_class: type
    kernels: KernelCensus
    threads: ThreadCensus


def _import_candidate(
    job: dict, job_dir: Path, device: torch.device, result: Result, screened: StaticReport, cost: _CheckCost
) -> _Imported:
    """The censuses set up, then the candidate imported; ``_Stop`` where it fails to import, defines no
    ``ModelNew`` or changes the numerics flags (put back first)."""
    flags_before = numerics_flags()
    with cost("census_setup"):
        # Before the import: it instruments Triton. The screen's model says which kernels the file defines.
        kernels, threads = _runtime_census(job, job_dir, device, result, screened.model)
    try:
        candidate_module = import_file(job_dir / CANDIDATE_FILE, CANDIDATE_MODULE)
    except BaseException as exc:  # whatever the candidate raises at import is its failure
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise _Stop(_failure("compile_error", "import_failed", exc, "import_candidate")) from None
    model_class = getattr(candidate_module, "ModelNew", None)
    if model_class is None:
        raise _Stop(Verdict("compile_error", "no_model_new", "the candidate defines no ModelNew", "import_candidate"))
    changed = changed_flags(flags_before, numerics_flags())
    if changed:
        restore_numerics_flags(flags_before)
        raise _Stop(Verdict("integrity_violation", "numerics_flags_changed", "; ".join(changed), "import_candidate"))
    return _Imported(candidate_module, model_class, kernels, threads)


def _preload_own_candidate(
    job: dict, job_dir: Path, device: torch.device, result: Result, screened: StaticReport, cost: _CheckCost
) -> _Imported | None:
    """kbench's own ``torch_compile`` candidate (its text checked against what the method writes for this task
    file) imported before the token and its first calls captured (``preload.preload_candidate_kernels``): the
    correctness stage then calls the code compiled here. It is the task's file and a class that compiles its
    Model, so importing it before the reference stage changes nothing the reference computes. Any other candidate,
    or one whose import fails here, is imported in its stage as always (the failure reported there, in order);
    the record (``environment.preloaded_candidate``) says which."""
    meta = job.get("meta", {})
    candidate = (job_dir / CANDIDATE_FILE).read_text(errors="replace")
    task = (job_dir / TASK_FILE).read_text(errors="replace")
    if not is_compiled_source(candidate, task, meta.get("provenance") or {}):
        result.environment["preloaded_candidate"] = {"not done": "not the torch_compile method's text for this task"}
        return None
    try:
        imported = _import_candidate(job, job_dir, device, result, screened, cost)
    except _Stop as stop:
        sys.modules.pop(CANDIDATE_MODULE, None)
        result.environment["preloaded_candidate"] = {"not done": f"import: {stop.verdict.message}"[:200]}
        return None
    result.environment["preloaded_candidate"] = preload_candidate_kernels(
        imported.module, imported.model_class, _checked_shapes(job), device
    )
    return imported


def _runtime_census(job: dict, job_dir: Path, device: torch.device, result: Result, model):
    """The kernel and thread censuses of the correctness calls; their records are in the result from now on."""
    path = job_dir / CANDIDATE_FILE
    source = path.read_text(errors="replace")
    policy = job.get("integrity_policy", "own_kernels")
    kernels = KernelCensus(source, path, device, policy, job.get("meta", {}).get("method", ""), model)
    first_shape = job["check_shapes"][0]
    kernels.plan(first_shape, _trials_per_shape(job)[first_shape])
    threads = ThreadCensus(path)
    result.integrity["kernel_census"] = kernels.record
    result.integrity["thread_census"] = threads.record
    return kernels, threads


class _CheckCost:
    """Seconds spent in the integrity checks, by kind (``integrity.check_seconds``): inside the correctness
    stage, and the parts of the checks after timing (``timed_output``, ``float64_timed``, ``same_addresses``).

    With the static screen's stage this is what the checks cost an evaluation; the one profiled call of the
    kernel census is in ``correctness``, its profiler's own start and stop in the census record.
    On a GPU a block's cost is the longer of its host time and its device span (two events around it):
    no synchronisation of its own (with several evaluations in flight each one waits for the GPU's time
    slice among their contexts), read once the evaluation's device work is done (``settle``).
    """

    def __init__(self, seconds: dict, device: torch.device) -> None:
        self.seconds, self.device = seconds, device
        self._pending: list = []  # (kind, host seconds, start event, end event), until settled

    @contextmanager
    def __call__(self, kind: str):
        started = time.perf_counter()
        events = None
        if self.device.type == "cuda":
            events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            events[0].record()
        try:
            yield
        finally:
            host = time.perf_counter() - started
            if events is None:
                self._add(kind, host)
            else:
                events[1].record()
                self._pending.append((kind, host, *events))

    def settle(self) -> None:
        """Add the blocks' device spans; a device that fails here leaves them out, recorded as not settled."""
        pending, self._pending = self._pending, []
        for kind, host, start, end in pending:
            try:
                end.synchronize()
                self._add(kind, max(host, start.elapsed_time(end) / 1e3))
            except RuntimeError as exc:
                self.seconds["not settled"] = str(exc)[:300]
                return

    def _add(self, kind: str, seconds: float) -> None:
        self.seconds[kind] = round(self.seconds.get(kind, 0.0) + seconds, 6)


def _queue_timed_check(expected, outputs, what: str, index: int, tolerance) -> Callable[[], None]:
    """A check after timing's comparison, queued now; returns the call that reads it and raises ``_Stop`` where the
    outputs are wrong (read again, it judges the same values, without a wait)."""
    judge = queue_comparison(as_output_list(expected), as_output_list(outputs), tolerance)

    def check() -> None:
        comparison = judge()
        if not comparison.ok:
            message = f"{what} (input set {index}) is wrong: {comparison.reason}"
            raise _Stop(Verdict("integrity_violation", "timed_output_mismatch", message, "timing"))

    return check


def _checked_shapes(job: dict) -> dict[str, dict]:
    """The shapes checked for correctness, by name: their dimensions."""
    return {name: job["task"]["shapes"][name] for name in job["check_shapes"]}


def _trials_per_shape(job: dict) -> dict[str, int]:
    """Correctness trials per checked shape: the orchestrator's ``trials_per_shape``, else ``trials`` for each."""
    given = job.get("trials_per_shape") or {}
    return {name: int(given.get(name, job["trials"])) for name in job["check_shapes"]}


def _unpredictable_seed() -> int:
    """A seed drawn from the kernel's random source now. The timed inputs come from it, so a candidate
    cannot have computed their answers while it was imported or checked (it could predict the
    configured seed's: tests/adversarial/cases/precomputes_predicted_inputs.py). Rebinding
    ``os.urandom`` is forbidden by the static screen (``static_monkey_patch``)."""
    return int.from_bytes(os.urandom(4), "little") >> 1


def _trial_seed(seed: int, trial: int) -> int:
    return seed + 1000 * (trial + 1)


def _is_compile_error(exc: BaseException) -> bool:
    return any(type(e).__name__ in _COMPILE_ERROR_TYPES for e in causes(exc))


def _failure(status: str, reason: str, exc: BaseException, stage: str) -> Verdict:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    detail = "".join(lines)[-4000:]
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_initialized() else torch.device("cpu")
    taken = others_took_it(exc, device, candidate_ran=stage not in _BEFORE_THE_CANDIDATE)
    if taken:  # the other evaluations in flight and the spares held the memory: not the candidate's failure
        return Verdict("infra_error", "device_memory_taken", f"out of memory: {taken}\n" + detail, stage)
    return Verdict(status, reason, f"{type(exc).__name__}: {exc}"[:500] + "\n" + detail, stage)


class _StageClock:
    """Writes the current stage to ``out/stage`` and accumulates seconds per stage."""

    def __init__(self, out_dir: Path, seconds: dict) -> None:
        self.out_dir = out_dir
        self.seconds = seconds
        self.stage = None
        self.since = time.perf_counter()
        out_dir.mkdir(parents=True, exist_ok=True)

    def mark(self, stage: str) -> None:
        now = time.perf_counter()
        if self.stage is not None:
            self.seconds[self.stage] = round(self.seconds.get(self.stage, 0.0) + now - self.since, 6)
        self.stage, self.since = stage, now
        (self.out_dir / STAGE_FILE).write_text(stage)
