"""The reference's outputs for every checked shape and trial (computed before any code of the candidate runs), the
candidate's import with its censuses set up, and its checked calls: each trial on fresh seeded inputs with the
allocator poisoned, its checks queued behind its call and judged before the next call (``host_reads.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import torch

from runner.methods.torch_compile import is_compiled_source
from runner.static_check import StaticReport
from runner.worker.compare import queue_comparison
from runner.worker.integrity import (
    ThreadCensus,
    changed_flags,
    numerics_flags,
    poison_allocator,
    queue_call_violation,
    restore_numerics_flags,
    snapshot_inputs,
)
from runner.worker.kernel_census import KernelCensus
from runner.worker.loading import as_output_list, build_model, import_file, make_inputs
from runner.worker.precision import PrecisionCheck, float64_references
from runner.worker.preload import dynamo_graphs, preload_candidate_kernels
from runner.worker.protocol import CANDIDATE_FILE, CANDIDATE_MODULE, TASK_FILE, Result, Trial, Verdict
from runner.worker.stages import (
    CheckCost,
    Stop,
    checked_shapes,
    failure,
    is_compile_error,
    seed_of_trial,
    trials_per_shape,
)


class ReferenceOutputs(NamedTuple):
    """The task's module and what its reference computed, before any code of the candidate ran: the outputs of every
    checked shape's trials (``(shape, trial)``; emptied once the candidate's checks are done) and their float64
    answers (``precision.py``)."""

    module: ModuleType
    expected: dict[tuple[str, int], list]
    precision: PrecisionCheck


def reference_outputs(job: dict, job_dir: Path, device: torch.device, result: Result, cost: CheckCost):
    """The reference stage: the task's file imported and its Model called on every checked shape's trials' inputs,
    then the float64 answers of trial 0 (``precision.record`` kept in the result)."""
    seed = int(job["seed"])
    shapes = checked_shapes(job)
    trials_of = trials_per_shape(job)
    reference_module = import_file(job_dir / TASK_FILE, "kbench_task")
    expected: dict[tuple[str, int], list] = {}
    for shape_name, dims in shapes.items():
        model = build_model(reference_module.Model, reference_module, dims, device, seed)
        for trial in range(trials_of[shape_name]):
            inputs = make_inputs(reference_module, dims, device, seed_of_trial(seed, trial))
            expected[(shape_name, trial)] = as_output_list(model(*inputs))
        del model
    with cost("float64_reference"):
        precision = float64_references(reference_module, shapes, device, seed, seed_of_trial(seed, 0), expected)
    result.integrity["precision"] = precision.record
    return ReferenceOutputs(reference_module, expected, precision)


def check_calls(
    job: dict,
    device: torch.device,
    result: Result,
    reference: ReferenceOutputs,
    imported: Imported,
    cost: CheckCost,
    preloaded: bool,
) -> None:
    """The correctness stage: the candidate built from the reference's seed for each checked shape and called on each
    trial's inputs, every call's checks judged in order (``Stop`` at the first that fails: the trials recorded end
    with it); then the reference's outputs let go. ``preloaded``: the candidate was imported ahead
    (``preload_own_candidate``), whose compiled code these calls should find."""
    seed = int(job["seed"])
    shapes = checked_shapes(job)
    trials_of = trials_per_shape(job)
    tolerance = job["task"].get("tolerance")
    reference_module, expected, precision = reference
    model_class, kernels, threads = imported.model_class, imported.kernels, imported.threads
    graphs = dynamo_graphs()
    for shape_name, dims in shapes.items():
        try:
            candidate = build_model(model_class, reference_module, dims, device, seed)
        except Exception as exc:
            raise Stop(failure("runtime_error", "init_failed", exc, "correctness")) from None
        previous_outputs: list = []
        # Each trial's checks are queued behind its call and judged after the next trial's synchronisation before
        # its call (the last one's after the loop): their results are read without a wait (host_reads.py), and no
        # call comes before the verdict on the one before it.
        judge_previous = None
        for trial in range(trials_of[shape_name]):
            trial_seed = seed_of_trial(seed, trial)
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
                status = "compile_error" if is_compile_error(exc) else "runtime_error"
                raise Stop(failure(status, "forward_failed", exc, "correctness")) from None
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
    if preloaded:  # the preload's compiled code called, or compiled again (then it bought nothing)
        result.environment["preloaded_candidate"]["graphs_compiled_in_correctness"] = dynamo_graphs() - graphs
    expected.clear()


def _queue_trial_checks(at, call, expected: list, censuses, tolerance, result: Result, cost):
    """A checked call's verdicts, their device work queued now: returns the call that judges them in their order
    (the threads, the call's integrity, the kernel census, the comparison, then on trial 0 the float64 answer),
    records the trial and raises ``Stop`` at the first that fails. ``at``: (shape, trial, seed); ``call``:
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
            raise Stop(
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
            raise Stop(
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
                raise Stop(Verdict("integrity_violation", reason, message, "correctness"))

    return judge


class Imported(NamedTuple):
    """The candidate's module, its ``ModelNew`` and the censuses of its correctness calls (made before its import)."""

    module: ModuleType
    model_class: type
    kernels: KernelCensus
    threads: ThreadCensus


def import_candidate(
    job: dict, job_dir: Path, device: torch.device, result: Result, screened: StaticReport, cost: CheckCost
) -> Imported:
    """The censuses set up, then the candidate imported; ``Stop`` where it fails to import, defines no
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
        raise Stop(failure("compile_error", "import_failed", exc, "import_candidate")) from None
    model_class = getattr(candidate_module, "ModelNew", None)
    if model_class is None:
        raise Stop(Verdict("compile_error", "no_model_new", "the candidate defines no ModelNew", "import_candidate"))
    changed = changed_flags(flags_before, numerics_flags())
    if changed:
        restore_numerics_flags(flags_before)
        raise Stop(Verdict("integrity_violation", "numerics_flags_changed", "; ".join(changed), "import_candidate"))
    return Imported(candidate_module, model_class, kernels, threads)


def preload_own_candidate(
    job: dict, job_dir: Path, device: torch.device, result: Result, screened: StaticReport, cost: CheckCost
) -> Imported | None:
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
        imported = import_candidate(job, job_dir, device, result, screened, cost)
    except Stop as stop:
        sys.modules.pop(CANDIDATE_MODULE, None)
        result.environment["preloaded_candidate"] = {"not done": f"import: {stop.verdict.message}"[:200]}
        return None
    result.environment["preloaded_candidate"] = preload_candidate_kernels(
        imported.module, imported.model_class, checked_shapes(job), device
    )
    return imported


def _runtime_census(job: dict, job_dir: Path, device: torch.device, result: Result, model):
    """The kernel and thread censuses of the correctness calls; their records are in the result from now on."""
    path = job_dir / CANDIDATE_FILE
    source = path.read_text(errors="replace")
    policy = job.get("integrity_policy", "own_kernels")
    kernels = KernelCensus(source, path, device, policy, job.get("meta", {}).get("method", ""), model)
    first_shape = job["check_shapes"][0]
    kernels.plan(first_shape, trials_per_shape(job)[first_shape])
    threads = ThreadCensus(path)
    result.integrity["kernel_census"] = kernels.record
    result.integrity["thread_census"] = threads.record
    return kernels, threads
