"""The timed stage: the pair measured in the measurement's turn on inputs drawn from a seed picked only now, each
placement with its own inputs and weights; then the checks after timing (work left on other streams, the roofline,
the output of the last timed call and of one more on new values at its addresses)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import torch

from runner.analysis.roofline import roofline_for
from runner.worker.compare import queue_comparison
from runner.worker.correctness import ReferenceOutputs
from runner.worker.device_token import EXCLUSIVE, SHARED, TOKEN_ENV, WAIT_STAGE, DeviceToken
from runner.worker.input_offsets import InputOffsets
from runner.worker.integrity import unjoined_work
from runner.worker.loading import as_output_list, build_model, make_inputs
from runner.worker.placements import PlacementMaker, TimedSide, timing_inputs, weight_copies
from runner.worker.protocol import Result, TimingSettings, Verdict
from runner.worker.quiet_turn import QuietTurn
from runner.worker.stages import CheckCost, StageClock, Stop, failure
from runner.worker.timing import GpuThrottled, instruments, measure_pair


class TimedPair(NamedTuple):
    """What the timed stage measured on, for the checks after it: the raw samples (``samples.json``), the
    reference's weight copies, the candidate's side (its last call), the input sets and their seed, and the timed
    shape's dimensions."""

    raw: dict
    references: list
    candidate: TimedSide
    input_sets: list
    timed_seed: int
    dims: dict


def time_pair(
    job: dict,
    device: torch.device,
    result: Result,
    clock: StageClock,
    token: DeviceToken,
    reference_module,
    model_class: type,
) -> TimedPair:
    """The timed stage: the inputs and weight copies of every placement made, the token approached, then the pair
    measured in the measurement's turn (``timing.measure_pair``; ``Stop`` where it fails or the GPU throttles), its
    summary kept in ``result.timing``."""
    task = job["task"]
    seed = int(job["seed"])
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

    # Held from the batch where a side is known to wait for the device, no other context made beside it (quiet_turn.py).
    quiet = QuietTurn(os.environ.get(TOKEN_ENV)) if job.get("quiet_waiting_turns") and device.type == "cuda" else None
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
            quiet=quiet,
        )
    except GpuThrottled as exc:  # the GPU's fault, not the candidate's: no verdict on its speed
        raise Stop(Verdict("infra_error", "gpu_throttled", str(exc)[:500], "timing")) from None
    except Exception as exc:
        raise Stop(failure("runtime_error", "timing_failed", exc, "timing")) from None
    finally:
        if quiet is not None:
            quiet.release()
        token.hold(SHARED)
    if quiet is not None and quiet.asked:
        timing.quiet_turn = quiet.record
    timing.input_sets = len(groups[0])
    timing.weight_copies = len(references)
    timing.input_seed = timed_seed
    result.timing = timing
    moved = offsets.record()
    if moved is not None:
        result.environment["input_offsets"] = moved
    return TimedPair(raw, references, candidate, input_sets, timed_seed, dims)


def checks_after_timing(
    job: dict, device: torch.device, result: Result, pair: TimedPair, reference: ReferenceOutputs, cost: CheckCost
) -> None:
    """The checks after timing, in order (``Stop`` at the first that fails): work the candidate left on other streams
    (the sync audits), the roofline (``faster_than_physics``), the last timed call's output against the reference and
    its float64 answer, and one more call on new values written at the same addresses."""
    task = job["task"]
    seed = int(job["seed"])
    timed_shape = job["timed_shape"]
    tolerance = task.get("tolerance")
    timing = result.timing
    reference_module, precision = reference.module, reference.precision
    references, candidate, input_sets = pair.references, pair.candidate, pair.input_sets
    timed_seed, dims = pair.timed_seed, pair.dims
    checks = result.integrity.setdefault("runtime_checks", [])
    checks += ["timed_output", "sync_audit"] if device.type == "cuda" else ["timed_output"]
    evidence = unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, timing.audit_recheck)
    if evidence:
        raise Stop(Verdict("integrity_violation", "unjoined_stream_work", evidence, "timing"))
    roofline = roofline_for(task, dims, job.get("peaks")) if device.type == "cuda" else None
    if roofline is not None:
        result.roofline = {
            **roofline.to_dict(),
            "reference": roofline.achieved(timing.reference.median_ms),
            "candidate": roofline.achieved(timing.candidate.median_ms),
        }
        impossible = roofline.impossible(timing.candidate.median_ms) if timing.cache == "cold" else None
        if impossible:
            raise Stop(Verdict("integrity_violation", "faster_than_physics", impossible, "timing"))
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
        raise Stop(
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


def _queue_timed_check(expected, outputs, what: str, index: int, tolerance) -> Callable[[], None]:
    """A check after timing's comparison, queued now; returns the call that reads it and raises ``Stop`` where the
    outputs are wrong (read again, it judges the same values, without a wait)."""
    judge = queue_comparison(as_output_list(expected), as_output_list(outputs), tolerance)

    def check() -> None:
        comparison = judge()
        if not comparison.ok:
            message = f"{what} (input set {index}) is wrong: {comparison.reason}"
            raise Stop(Verdict("integrity_violation", "timed_output_mismatch", message, "timing"))

    return check


def _unpredictable_seed() -> int:
    """A seed drawn from the kernel's random source now. The timed inputs come from it, so a candidate
    cannot have computed their answers while it was imported or checked (it could predict the
    configured seed's: tests/adversarial/cases/precomputes_predicted_inputs.py). Rebinding
    ``os.urandom`` is forbidden by the static screen (``static_monkey_patch``)."""
    return int.from_bytes(os.urandom(4), "little") >> 1
