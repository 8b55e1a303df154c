"""``make bench``: the runner's own figures, computed from finished runs (``python -m runner.bench``).

- ``repeat A B``: two runs of the same configuration: per task and method, |speedup_A /
  speedup_B - 1| (median, p95, max), split into single ops and fusions (levels 1-2) and whole
  blocks (level 3); plus each run's duty cycle (timed GPU time over the wall time, with
  isolation, correctness, compile and logging included) and evaluations per minute. ``A B A2 B2 ...``: the
  pairs of a suite run in shards (``suite.shard=K/N``), joined; ``--floor FILE`` (``processes``' output, as often
  as there are files): each covered task's spread between fresh processes, and the moves less those floors.
- ``overlap A B``: two runs made at the same time on one GPU: pairs of measurement windows
  (logged timing loops) that overlap in time. The per-GPU lock promises zero.
- ``disturbed RUN``: the timed batches something slowed, and whether another worker's CUDA context
  was being made or torn down meanwhile, or a compile warm-up's (``runner/analysis/disturbances.py``).
- ``paced RUN``: the sides whose samples took longer behind the other side's than their queued pace (led, or
  behind their own side): the host's launches in them, or another order effect (``runner/analysis/host_pace.py``).
- ``processes [--processes N] [--method M] [--hold-fraction F] TASK_OR_CATEGORY...``: each task's reference and
  method M's candidate timed in N fresh processes, each holding its share of F of the GPU's free memory first: how
  far apart the processes' speedups (and each side's medians) lie against one speedup's noise
  (``runner/process_modes.py``).
- ``autotune CACHE_A CACHE_B``: two compile caches (``executor.compile_cache_dir``) of the same candidates: the
  kernels whose autotuning chose differently (``runner/analysis/autotune.py``).
- ``ncu PROFILE.csv RUN``: kernel time from Nsight Compute (``gpu__time_duration.sum`` summed
  per task over one call) against the reference's median time in the run.

- ``accuracy OUT``: a reference run of ``bench_protocol.NCU_TASKS`` and the Nsight Compute profile of the
  same references (``profile TASK...`` is the driver ncu runs), compared as above.
- ``all OUT [--experiment E] [--methods M,M] [--shards N] [--floor-processes P] [--set KEY=VALUE ...]``
  (``make bench``): the whole protocol, each method's pair of the whole suite, their floors, the lock pair and the
  accuracy comparison, every figure judged against its target (``runner/bench_protocol.py``); ``OUT/bench.json``.

Each prints one JSON object; BENCHMARKS.md records them with the command, machine and date.
"""

from __future__ import annotations

import bisect
import inspect
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import NamedTuple

from runner.analysis.autotune import AUTOTUNING_STATES, NotACache, kernels_alike, kernels_differing, ran_configs
from runner.analysis.autotune import compare as autotune_choices
from runner.analysis.clock_mix import moved_at_matched_clocks, read_samples
from runner.analysis.disturbances import disturbances
from runner.analysis.host_pace import host_pace
from runner.analysis.records import job_results, samples_path
from runner.gpu.memory_admission import GIB
from runner.intervals import union_seconds
from runner.warmup_beside import warmup_windows
from runner.worker.device_token import EXCLUSIVE, ISOLATE_DEVICE, token_windows


def _quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {
        "n": len(ordered),
        "median_pct": 100 * statistics.median(ordered),
        "p95_pct": 100 * pick(0.95),
        "max_pct": 100 * ordered[-1],
    }


def _while_warming_up(manifest: dict, results: list, warmups: list[dict], lanes: int) -> dict | None:
    """The sweep split at the end of its last warm-up (runner/warmup_beside.py): each part's wall time and what was
    measured in it (a turn counts where it began), and the duty of each. A cold torch_compile pass on the H200 ran at
    72.4% while its warm-ups ran and at 88.5% after (BENCHMARKS.md, forty-first session): the warm-up's cost, apart.
    None where no warm-up ran beside the sweep, or the run did not finish."""
    wall = float(manifest.get("wall_s") or 0.0)
    if not warmups or not wall or "finished" not in manifest:
        return None
    start = float(manifest["finished"]) - wall
    last = max(float(line["ended"]) for line in warmups)
    until = min(max(last - start, 0.0), wall)
    measured = [0.0, 0.0]
    for _, result in results:
        if result.timing:
            began = result.timing.window[0] if result.timing.window else start
            measured[began >= last] += result.timing.measured_s
    parts = {}
    for name, seconds, part in (("until_last_warmup", until, measured[0]), ("after", wall - until, measured[1])):
        parts[name] = {
            "wall_s": seconds,
            "measured_s": part,
            "duty_pct": 100 * part / (seconds * lanes) if seconds else None,
        }
    return parts


def duty(run_dir: Path) -> dict:
    """Measured time over wall time; and where the rest went: the device phases (the GPU's work token
    held by some evaluation, see ``runner/worker/device_token.py``), the measurements' exclusive turns
    and the compile warm-up; and the time between turns, hand-overs apart from cohorts (``between_turns``).

    With several GPUs (``hardware.gpus``) each has its own token, a lane: turns on different GPUs
    may overlap (that is the point), so the turns and phases are judged per lane, and the shares
    are of the lanes' wall time together (``wall_s`` times the number of lanes)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    results = job_results(run_dir)
    sampled = list(_turns_sampled(run_dir, results))  # every samples file read once, for both turn figures
    measured = sum(r.timing.measured_s for _, r in results if r.timing)
    wall = float(manifest.get("wall_s") or 0.0)
    setup = float(manifest.get("setup_s") or 0.0)
    # Per lane, each result's task, windows and states apart (a warm-up's: whether its windows cut in).
    lane_results: dict[str, list] = {}
    for _, r in results:
        record = r.environment.get("device_token", {})
        if "path" in record:  # a worker that died before holding the token left no record: no lane of its own
            windows = token_windows(record)
            lane_results.setdefault(record["path"], []).append((r.task_id, windows, evaluation_states(r, windows)))
    warmups = warmup_windows(run_dir)
    for line in warmups:  # a warm-up beside the sweep: its windows are device phases of its lane
        record = line.get("token") or {}
        if "path" in record:
            entry = (f"{WARMUP_TASK}{line['eval_id']}", token_windows(record), warmup_states(line))
            lane_results.setdefault(record["path"], []).append(entry)
    lanes = {
        path: [window for _, windows, _ in per_result for window in windows]
        for path, per_result in lane_results.items()
    }
    in_flight = max((int(r.environment.get("lane", {}).get("in_flight") or 0) for _, r in results), default=0)
    # The run's lanes (a GPU given no evaluation still had its wall time), at least those seen.
    lane_count = max(int(manifest.get("lanes") or 1), len(lanes))
    lane_wall = wall * lane_count
    device_phases = sum(union_seconds([(start, end) for start, end, _ in w]) for w in lanes.values())
    # The evaluations' own windows, per lane, warm-ups' apart: the rest of the device phases is the seconds when only
    # a warm-up beside the sweep held the token (its compiled calls and autotuning: the compile's own device work).
    evaluation_phases = sum(
        union_seconds(
            [window[:2] for task, windows, _ in per_result if not task.startswith(WARMUP_TASK) for window in windows]
        )
        for per_result in lane_results.values()
    )
    turns = {lane: sorted((start, end) for start, end, mode in w if mode == EXCLUSIVE) for lane, w in lanes.items()}
    exclusive = sum(end - start for lane_turns in turns.values() for start, end in lane_turns)
    spans = sum(max(end for _, end, _ in w) - min(start for start, _, _ in w) for w in lanes.values() if w)
    # The turns' union (their sum where none overlap, as in every valid run): both parts below take
    # it, so the parts add up to the wall time even for a run whose turns clashed.
    turn_seconds = sum(union_seconds(lane_turns) for lane_turns in turns.values())
    warmup = float(manifest.get("warmup_s") or 0.0)
    isolation = sorted({r.environment.get("device_token", {}).get("isolation", ISOLATE_DEVICE) for _, r in results})
    return {
        "run": run_dir.name,
        "measurement_isolation": isolation,
        "lanes": lane_count,
        "evaluations": len(results),
        "wall_s": wall,
        "measured_s": measured,
        "duty_pct": 100 * measured / lane_wall if wall else None,
        # The command's own set-up before the sweep (from the process's start: imports, configuration, checks; MLflow's
        # parent run too, for a run from before MLflow opened beside the sweep), which ``wall_s`` leaves out, and the
        # duty with it counted.
        "setup_s": setup,
        # Where the set-up went (``runner/setup_clock.py``; None for a run from before they were kept).
        "setup_parts_s": manifest.get("setup_parts_s"),
        "duty_with_setup_pct": 100 * measured / ((wall + setup) * lane_count) if wall else None,
        "evaluations_per_min": 60 * len(results) / wall if wall else None,
        # The wall time during which some evaluation held a lane's token (shared phases overlap:
        # counted once per lane), summed over the lanes.
        "device_phases_s": device_phases,
        "exclusive_s": exclusive,
        # The share of the lanes' wall time during which some measurement had its turn.
        "measuring_pct": 100 * exclusive / lane_wall if wall else None,
        # Two measurements' turns on one GPU overlapping: never, under either isolation (evidence, not assumed).
        "overlapping_turns": sum(_overlapping(lane_turns) for lane_turns in turns.values()),
        "warmup_s": warmup,
        # The warm-up beside the sweep (runner/warmup_beside.py): its candidates, their span, what the sweep waited.
        "warmup_beside": manifest.get("warmup_beside"),
        # The duty until the last warm-up beside the sweep ended, and after it (None without such warm-ups).
        "while_warming_up": _while_warming_up(manifest, results, warmups, lane_count),
        # The share of the lanes' wall time during which their GPU was reserved for some device work
        # (the compile warm-up, before the evaluations, reserves every lane).
        "device_reserved_pct": 100 * (device_phases / lane_count + warmup) / wall if wall else None,
        "measured_of_device_phases_pct": 100 * measured / device_phases if device_phases else None,
        "measured_of_exclusive_pct": 100 * measured / exclusive if exclusive else None,
        # Where the lanes' wall time went, in parts that add up to it: measured; inside the turns but
        # not measured (L2 flushes, audit calls, clock reads; the warm-up before the sixteenth session, since
        # then in the shared phase while it queues); evaluations' shared phases with no turn beside them; a
        # warm-up beside the sweep's device windows with no evaluation's beside them (a cold torch_compile pass on
        # the H200: 31.7 s of its 683, where the warm pass had none: BENCHMARKS.md, fifty-sixth session);
        # the compile warm-up before the sweep (it reserves every lane); and no device work at all (start-up,
        # workers not ready, results written, the end).
        "wall_parts_s": {
            "measured": measured,
            "turn_not_measured": turn_seconds - measured,
            "shared_phases_only": evaluation_phases - turn_seconds,
            "compile_beside_only": device_phases - evaluation_phases,
            "compile_warmup": warmup * lane_count,
            "no_device_work": lane_wall - device_phases - warmup * lane_count,
        },
        # From each lane's first window to its last, summed: in a run made in one go, the lanes' wall
        # time minus this is its start and end, so the rest of ``no_device_work`` lies between windows.
        "first_to_last_window_s": spans,
        "between_turns": between_turns(lane_results.values(), in_flight or None),
        "slot_parts_s": slot_parts(results),
        "sweep_start_s": sweep_start(manifest, results),
        "turn_parts_s": turn_parts(sampled),
        "batches_rest_parts_s": batches_rest_parts(sampled),
        "leads_s": lead_seconds(sampled),
        "gpu_between_batches": gpu_between_batches(sampled),
        "audits_taken_again": audits_taken_again(results),
        "short_batches": short_batches(sampled),
        "memory_released": memory_released(results),
    }


def memory_released(results) -> dict | None:
    """What the workers gave back to the driver with the token held, per stage (``runner/worker/memory_release.py``):
    evaluations, GiB given back, and the seconds they then held the token while the driver cleared it. None for a
    run from before the fifty-fourth session, or off a GPU."""
    stages: dict[str, dict] = {}
    for _, result in results:
        for line in result.environment.get("device_memory_released") or []:
            if "freed_bytes" not in line:
                continue
            stage = stages.setdefault(line["stage"], {"evaluations": 0, "freed_gib": 0.0, "settle_s": 0.0})
            stage["evaluations"] += 1
            stage["freed_gib"] += line["freed_bytes"] / GIB
            stage["settle_s"] += line["settle_s"]
    return stages or None


# A gap between two turns up to this long is a hand-over: the next measurement's warm-up beside the last one's
# checks after timing (43 ms, median, in a full suite on the H100: BENCHMARKS.md, seventeenth session). A longer
# one holds the first shared phases of evaluations started meanwhile (their reference outputs and correctness
# calls, 0.64-0.67 s each, median), which run together, a cohort, until the next measurement may start (such a
# gap: 0.73 s, median). The gaps include any time without device work between the turns.
HAND_OVER_S = 0.1


# How many of the longer gaps ``between_turns`` names, those that waited longest for their slowest member.
SLOWEST_SHOWN = 5


def between_turns(lanes, slots: int | None = None) -> dict:
    """Where the time between consecutive turns went, per lane, pooled: hand-overs, and the longer gaps with how
    many evaluations had their first shared phase in each. ``lanes``: per lane, each result's task, closed
    windows and states (``evaluation_states``; None for a warm-up beside the sweep, whose task starts with
    ``WARMUP_TASK``), ``(task_id, windows, states)``; ``slots``: ``executor.in_flight``.

    A cohort's first measurement waits for every member's first shared phase (``device_token.py``), so a gap
    lasts as long as its slowest member's. ``waited_for_slowest_s`` sums, over the gaps of two members or more,
    how much longer the slowest member's first shared window was than the next slowest's; ``slowest`` names the
    gaps where that was longest, with the task that held them (f40, a full suite on the H100: 3.4 s of 29.5,
    1.8 s of it one gap: BENCHMARKS.md, twenty-second session).

    What the longer gaps waited for: ``next_measured_s``, the seconds the measurement that ended each gap spent in
    each of its states during it (they add up to the gaps: in its first phase, the gap was its cohort's; waiting
    for memory or its worker, the lane had nothing ready); ``slots_s``, the lane's slots' seconds in each state
    during the gaps, all evaluations together, and ``no_evaluation`` for slots that held none (the sweep held
    back, or nothing left to take); ``warmup_windows_s``, the gaps' seconds during which a warm-up beside the sweep
    held the token.

    Whom the measurement that ended each gap waited for once it had asked for its turn (``waited_for_turn``: from
    the end of its approach, or the gap's start, to its turn): ``held_by_s``, the seconds some other window was open
    meanwhile, per kind of window (the state of its holder as it opened: another evaluation's ``first_phase``,
    ``approach`` or ``checks_after_timing``, or a warm-up's ``WARMUP_GATED`` / ``WARMUP_CUTTING_IN``), and
    ``nobody`` for the seconds none was (the lock's own hand-over); ``ended_by``, per kind, how many waits the
    last window to close was of that kind, and their seconds (bA, H200, torch_compile cold: 69 of 101 waits ended
    with a warm-up's window that cut in: BENCHMARKS.md, fortieth session)."""
    hand_overs: list[float] = []
    longer: list[float] = []
    members: list[int] = []
    beyond_second: list[dict] = []
    next_measured: dict[str, float] = {}
    slot_seconds: dict[str, float] = {}
    warmup_seconds = 0.0
    waits: list[float] = []
    held_by: dict[str, float] = {}
    ended_by: dict[str, dict] = {}
    for results in lanes:
        turns = sorted(
            (start, end, k)
            for k, (_, windows, _) in enumerate(results)
            for start, end, mode in windows
            if mode == EXCLUSIVE
        )
        firsts = [
            (task, *windows[0][:2])
            for task, windows, _ in results
            if windows and windows[0][2] != EXCLUSIVE and not task.startswith(WARMUP_TASK)
        ]
        # Every window but the turns, with its holder and its kind (the holder's state as it opened).
        opened = [
            (start, end, k, state_at(states, start) if states else UNKNOWN_STATE)
            for k, (_, windows, states) in enumerate(results)
            for start, end, mode in windows
            if mode != EXCLUSIVE
        ]
        warmups = [window[:2] for task, windows, _ in results if task.startswith(WARMUP_TASK) for window in windows]
        ended = turns[0][1] if turns else 0.0  # the latest end so far: a turn inside another (clashing) leaves no gap
        for start, end, owner in turns[1:]:
            gap_from, ended = ended, max(ended, end)
            if start <= gap_from:
                continue  # overlapping turns (``overlapping_turns`` counts them): no time between
            if start - gap_from <= HAND_OVER_S:
                hand_overs.append(start - gap_from)
                continue
            longer.append(start - gap_from)
            inside = sorted(
                (
                    (first_end - first_start, task)
                    for task, first_start, first_end in firsts
                    if first_start < start and first_end > gap_from
                ),
                reverse=True,
            )
            members.append(len(inside))
            if len(inside) >= 2:
                (slowest, task), (second, _) = inside[0], inside[1]
                beyond_second.append(
                    {"task": task, "gap_s": start - gap_from, "window_s": slowest, "next_slowest_s": second}
                )
            owner_windows, owner_states = results[owner][1], results[owner][2]
            if owner_states:
                _add_seconds(next_measured, seconds_in_states(owner_states, gap_from, start))
            asked = max([gap_from] + [end for _, end, mode in owner_windows if mode != EXCLUSIVE and end <= start])
            waits.append(start - asked)
            holders = [
                (max(a, asked), min(b, start), kind)
                for a, b, k, kind in opened
                if k != owner and a < start and b > asked
            ]
            for kind in {kind for _, _, kind in holders}:
                held_by[kind] = held_by.get(kind, 0.0) + union_seconds(
                    [(a, b) for a, b, held in holders if held == kind]
                )
            held_by["nobody"] = (
                held_by.get("nobody", 0.0) + (start - asked) - union_seconds([(a, b) for a, b, _ in holders])
            )
            if holders:
                last = max(holders, key=lambda holder: holder[1])[2]
                tally = ended_by.setdefault(last, {"n": 0, "s": 0.0})
                tally["n"] += 1
                tally["s"] += start - asked
            for task, _, states in results:
                if states and not task.startswith(WARMUP_TASK):  # a warm-up holds no slot
                    in_slot = seconds_in_states(states, gap_from, start)
                    _add_seconds(slot_seconds, {state: s for state, s in in_slot.items() if state in SLOT_STATES})
            warmup_seconds += union_seconds(
                [(max(a, gap_from), min(b, start)) for a, b in warmups if a < start and b > gap_from]
            )

    def part(gaps: list[float]) -> dict:
        return {"n": len(gaps), "s": sum(gaps), "median_s": statistics.median(gaps) if gaps else None}

    if slots and longer:
        slot_seconds["no_evaluation"] = slots * sum(longer) - sum(slot_seconds.values())
    beyond_second.sort(key=lambda gap: gap["window_s"] - gap["next_slowest_s"], reverse=True)
    return {
        "hand_overs": part(hand_overs),
        "longer": {
            **part(longer),
            "median_first_phases": statistics.median(members) if members else None,
            "waited_for_slowest_s": sum(gap["window_s"] - gap["next_slowest_s"] for gap in beyond_second),
            "slowest": beyond_second[:SLOWEST_SHOWN],
            "next_measured_s": next_measured,
            "slots_s": slot_seconds,
            "warmup_windows_s": warmup_seconds,
            "waited_for_turn": {"s": sum(waits), "held_by_s": held_by, "ended_by": ended_by},
        },
    }


# The steps of an evaluation's slot (``environment.lane.slot``, runner/orchestrator.py), in order: each part
# runs from its start mark to the next mark. The worker's own start and end come from the result. ``slot_parts``
# sums them; ``evaluation_states`` names its states after them, the worker's split further.
_SLOT_STEPS = (
    ("prepare", "taken", "prepared"),  # the job's directory written
    ("health_gate", "prepared", "gated"),  # the GPU's health read (and waited for)
    ("memory_admission", "gated", "admitted"),  # waiting until the GPU's memory admits it (``memory_admission.py``)
    ("worker_start", "admitted", "started_at"),  # the executor handing the job to a worker (a spare, or a fresh one)
    ("worker", "started_at", "finished_at"),
    ("worker_end", "finished_at", "ran"),  # the worker's process or container ending
    ("collect", "ran", "collected"),  # its result read
    ("read_gpu_after", "collected", "read_after"),
)
_WORKER_STEP = "worker"
# The worker's part of the slot, in ``evaluation_states``'s terms, in the order they come.
_WORKER_STATES = (
    "before_first_phase",  # the static screen, the preload, waiting at the ready gate for the token
    "first_phase",  # its first window: reference outputs, the candidate's import and correctness, timing set-up
    "ready",  # ready for its turn, queued behind other ready measurements (the turnstile)
    "approach",  # the turnstile held, the token shared: its warm-up beside the shared work still in
    "waiting_for_turn",  # asked for the turn: waiting for the shared holders that were in before it
    "turn",  # its measurement, the token exclusive
    "checks_after_timing",  # a window after the turn
    "after_device_work",  # between windows after the turn, or after the last: the worker writing its files
)
# A first try that ran out of memory, inside the admission's step (``slot.first_try``).
FIRST_TRY = "first_try"

# The task name under which ``duty`` files a warm-up beside the sweep's windows in its lane.
WARMUP_TASK = "warm-up:"

# An evaluation's states in the order they come (``evaluation_states``): those of ``SLOT_STATES`` hold one of the
# lane's slots (``executor.in_flight``). Before its slot took it, an evaluation is ``not_in_a_slot``; once its slot
# has read the GPU after it, ``done``.
NOT_IN_A_SLOT = "not_in_a_slot"
DONE = "done"
SLOT_STATES = tuple(
    state
    for name, _, _ in _SLOT_STEPS
    for state in (
        _WORKER_STATES if name == _WORKER_STEP else (name, FIRST_TRY) if name == "memory_admission" else (name,)
    )
)


def evaluation_states(result, windows: list) -> list[tuple[float, str]] | None:
    """What an evaluation was doing from when: ``(epoch seconds, state)`` in order, the state lasting until the next
    entry's time (``SLOT_STATES``; the last entry is ``DONE``), from its slot's marks (``environment.lane.slot``), its
    worker's start and end, and its closed token ``windows``. A mark earlier than the one before it (two clocks read
    apart) counts from that one. None without a slot's marks (runs before the fifteenth session)."""
    slot = result.environment.get("lane", {}).get("slot")
    if not slot or "read_after" not in slot or not result.started_at or not result.finished_at:
        return None
    at = {**slot, "started_at": result.started_at, "finished_at": result.finished_at}
    first = slot.get(FIRST_TRY)
    marks = []
    for name, start, _ in _SLOT_STEPS:
        if name == _WORKER_STEP:
            marks += [(result.started_at, "before_first_phase"), *_window_marks(windows)]
        elif start in at:  # a mark the slot lacks: the state before it lasts
            marks.append((at[start], name))
        if name == "memory_admission" and first:
            marks += [(first["admitted"], FIRST_TRY), (first["ran"], name)]
    marks.append((slot["read_after"], DONE))
    states, latest = [], float("-inf")
    for when, state in marks:
        latest = max(latest, when)
        states.append((latest, state))
    return states


def _window_marks(windows: list) -> list[tuple[float, str]]:
    """The states the worker's token ``windows`` mark (``_WORKER_STATES``): each window's start and end."""
    marks = []
    turn = next((k for k, (_, _, mode) in enumerate(windows) if mode == EXCLUSIVE), None)
    for k, (start, end, _) in enumerate(windows):
        if k == turn:
            during = "turn"
        elif turn is not None and k > turn:
            during = "checks_after_timing"
        else:
            during = "first_phase" if k == 0 else "approach"
        if turn is not None and k < turn:
            after = "ready" if k == 0 else "waiting_for_turn"
        else:
            after = "after_device_work"
        marks += [(start, during), (end, after)]
    return marks


def seconds_in_states(states: list[tuple[float, str]], start: float, end: float) -> dict[str, float]:
    """The seconds of ``start`` to ``end`` an evaluation spent in each state (``evaluation_states``); before its
    first entry, ``NOT_IN_A_SLOT``."""
    seconds: dict[str, float] = {}
    bounds = [(float("-inf"), NOT_IN_A_SLOT), *states, (float("inf"), DONE)]
    for (begins, state), (ends, _) in zip(bounds, bounds[1:]):
        overlap = min(ends, end) - max(begins, start)
        if overlap > 0:
            seconds[state] = seconds.get(state, 0.0) + overlap
    return seconds


def state_at(states: list[tuple[float, str]], when: float) -> str:
    """The state (``evaluation_states``, ``warmup_states``) an evaluation or warm-up was in at ``when``: of two
    entries at that time, the later."""
    k = bisect.bisect_right([at for at, _ in states], when)
    return states[k - 1][1] if k else NOT_IN_A_SLOT


# A warm-up beside the sweep's states (``warmup_states``): its windows waiting at the ready gate (``executor.
# warmup_cut_in_within``, before the sweep told it), or cutting in; a window's kind is the state it opened in.
WARMUP_GATED = "warm_up_at_the_gate"
WARMUP_CUTTING_IN = "warm_up_cutting_in"
# The kind of a window whose holder left no states (a result without its slot's marks).
UNKNOWN_STATE = "unknown"


def warmup_states(line: dict) -> list[tuple[float, str]]:
    """A warm-up's states from its line in ``WARMUP_LOG``: cutting in from its start where every warm-up did (no
    ``cut_in_told``), else at the gate until told (never, where it ended first), then cutting in."""
    started, ended = float(line["started"]), float(line["ended"])
    if "cut_in_told" not in line:
        return [(started, WARMUP_CUTTING_IN), (ended, DONE)]
    told = line["cut_in_told"]
    states = [(started, WARMUP_GATED)]
    if told is not None and told < ended:
        states.append((max(started, float(told)), WARMUP_CUTTING_IN))
    return [*states, (ended, DONE)]


def _add_seconds(totals: dict[str, float], seconds: dict[str, float]) -> None:
    for state, value in seconds.items():
        totals[state] = totals.get(state, 0.0) + value


def turn_parts(sampled: list) -> dict | None:
    """Where the measurements' turns went, summed over the evaluations, in parts that add up to their exclusive
    windows: the kept samples (what ``measured`` counts: the batches' and the audited calls kept as samples), the
    rest of the audit calls (one call of a side closed by a device-wide synchronisation, ``timing.py``: the
    synchronisation, and the whole call where it was not kept), from the turn's start to its first batch (a round
    taken again after the hand-over), after its last batch (the audits' judgement, the result), and the rest of the
    batches (the L2 flush before every sample, events, the batches' own gaps and the ones taken again). From each
    evaluation's ``samples.json``; None where none has one (f51 on the H100: samples 277.4 s of 295.5, audits 4.0 s,
    before the first batch 1.4 s, after the last 0.8 s: BENCHMARKS.md, twenty-fifth session). ``sampled``: from
    ``_turns_sampled``."""
    parts = dict.fromkeys(("samples", "audits", "before_first_batch", "after_last_batch", "batches_rest"), 0.0)
    seen = False
    for (start, end), raw, batched, audit_calls, audit_samples, _ in sampled:
        seen = True
        batches = raw["batch_window"]
        first, last = min(b[0] for b in batches), max(b[1] for b in batches)
        parts["samples"] += batched + audit_samples
        parts["audits"] += audit_calls - audit_samples
        parts["before_first_batch"] += first - start
        parts["after_last_batch"] += end - last
        parts["batches_rest"] += (last - first) - batched - audit_calls
    return parts if seen else None


def batches_rest_parts(sampled: list) -> dict | None:
    """``turn_parts``'s ``batches_rest`` in two parts that add up to it, from each kept batch's span (its first
    sample's start to its last one's end on the sampler's clock, ``batch_span_ms`` in ``samples.json``): between
    the samples inside the batches (on a GPU the L2 flushes after each batch's first, the events, any wait for the
    host's launches) and around them (each batch's first flush and any lead, its audit's flush and synchronisation,
    and where a batch began on an idle device, after an audit's synchronisation or where the host fell behind, the
    host's work before its first sample; before the sixty-first session every batch was closed by a synchronisation
    before the next was queued). None where no samples file has the
    spans (runs from before the twenty-eighth session). ``sampled``: from ``_turns_sampled``."""
    parts = {"between_samples": 0.0, "around_batches": 0.0}
    seen = False
    for _, raw, batched, audit_calls, _, _ in sampled:
        if raw.get("batch_span_ms") is None:
            continue
        seen = True
        parts["between_samples"] += sum(raw["batch_span_ms"]) / 1000.0 - batched
        parts["around_batches"] += _around_batches(raw, audit_calls)
    return parts if seen else None


def lead_seconds(sampled: list) -> float | None:
    """Seconds the GPU slept ahead of the samples that found its queue short (``batch_lead_ms`` in ``samples.json``,
    ``samplers.QueueLead``), all turns together: part of ``batches_rest``, between the samples or before a batch's
    first. None where no samples file records them (runs from before the fifty-eighth session). ``sampled``: from
    ``_turns_sampled``."""
    leads = [sum(raw["batch_lead_ms"]) for _, raw, *_ in sampled if raw.get("batch_lead_ms") is not None]
    return sum(leads) / 1000.0 if leads else None


def gpu_between_batches(sampled: list) -> dict | None:
    """The GPU's own gaps between the batches of each turn, from a batch's last end event to the next one's first start
    event (``batch_gap_before_ms`` in ``samples.json``, ``CudaSampler.gap_before``; each turn's first batch's, which
    reaches back before the turn, and any unread, left out), all turns together: how many, their sum (s) and median
    (ms). Each holds the next batch's first flush and any lead, and after an audited batch its audit call: what
    ``batches_rest_parts``' ``around_batches`` holds, with the audit calls, which that leaves out. None where no
    samples file records a gap (runs from before the sixty-first session, or on the host clock). ``sampled``: from
    ``_turns_sampled``."""
    gaps = [gap for _, raw, *_ in sampled for gap in (raw.get("batch_gap_before_ms") or [])[1:] if gap is not None]
    if not gaps:
        return None
    return {"batches": len(gaps), "sum_s": sum(gaps) / 1000.0, "median_ms": statistics.median(gaps)}


def audits_taken_again(results) -> dict:
    """The evaluations whose measurement's sync audits would have flagged unjoined work, so that fresh audits were
    taken in the turn after the last batch (``Timing.audit_top_up``: a shape's few audits brought up to three;
    ``Timing.audit_recheck``: five per side in each shape judged instead), how many of each, and the seconds they
    took, together (part of ``turn_parts``' ``after_last_batch``; none recorded before the sixty-second session's
    top-up)."""
    timings = [result.timing for _, result in results if result.timing]
    topped = [t.audit_top_up for t in timings if t.audit_top_up]
    rechecked = [t.audit_recheck for t in timings if t.audit_recheck]
    return {
        "topped_up": len(topped),
        "rechecked": len(rechecked),
        "seconds": sum(float(record.get("seconds") or 0.0) for record in topped + rechecked),
    }


def _around_batches(raw: dict, audit_calls: float) -> float:
    """Seconds of a turn's batches (first launched to last closed) outside their spans and audit calls: the GPU
    waiting around them. ``raw``: a ``samples.json`` with ``batch_span_ms``."""
    batches = raw["batch_window"]
    first, last = min(b[0] for b in batches), max(b[1] for b in batches)
    return (last - first) - sum(raw["batch_span_ms"]) / 1000.0 - audit_calls


def short_batches(sampled: list) -> dict | None:
    """The evaluations whose kept batches lasted less than their ``batch_min_ms`` (the median of their spans), by
    pairs per batch, and how long the GPU waited around their batches (``batches_rest_parts``' ``around_batches``).
    A batch of ``batch`` pairs among them was sized by a warm-up round that took longer than the calls do (b8, H200,
    torch_compile, forty-third session: 45 of 111 under 50 ms, all of 20 pairs, 2.4 s of the 3.2 s around all
    batches); one of the most pairs (``timing.batch_pairs``) holds calls too short for any batch to last that long.
    Each of the shortest lists the rounds that sized its batches (``timing.sizing_rounds_ms``; none before the
    forty-fourth session). In that session's pass b (H200), with the round in the turn, 17 evaluations were still
    under 50 ms, 11 of them at 20 pairs of calls under 1 ms, which only rounds of 2.5 ms or more give. None where no
    job asked for a least batch."""
    counted, by_pairs, around, shortest = 0, {}, 0.0, []
    for _, raw, _, audit_calls, _, (job, result) in sampled:
        least = float(job.get("timing", {}).get("batch_min_ms") or 0.0)
        if least <= 0 or not raw.get("batch_span_ms") or result.timing is None:
            continue
        counted += 1
        span = statistics.median(raw["batch_span_ms"])
        if span >= least:
            continue
        pairs = result.timing.batch_pairs
        by_pairs[pairs] = by_pairs.get(pairs, 0) + 1
        around += _around_batches(raw, audit_calls)
        shortest.append(
            {
                "task": result.task_id,
                "median_span_ms": span,
                "batch_pairs": pairs,
                "sizing_rounds_ms": result.timing.sizing_rounds_ms,
            }
        )
    if not counted:
        return None
    shortest.sort(key=lambda entry: entry["median_span_ms"])
    return {
        "evaluations": sum(by_pairs.values()),
        "of": counted,
        "by_batch_pairs": dict(sorted(by_pairs.items())),
        "around_batches_s": around,
        "shortest": shortest[:SLOWEST_SHOWN],
    }


def _turns_sampled(run_dir: Path, results):
    """Per evaluation measured in one turn whose ``samples.json`` has its batches: the turn (start, end), the raw
    samples, the seconds of its batches' kept samples, of its audit calls (each from its start event to the
    end event after its synchronisation) and of the audited calls kept as samples (none before the thirty-first
    session), which lie inside the audit calls; and its job and result (``job_results``)."""
    for job, result in results:
        record = result.environment.get("device_token", {})
        turns = [(start, end) for start, end, mode in token_windows(record) if mode == EXCLUSIVE]
        path = samples_path(run_dir, result.eval_id)
        if len(turns) != 1 or not path.exists():
            continue
        raw = json.loads(path.read_text())
        if not raw.get("batch_window"):
            continue
        batched = (sum(raw["reference"]) + sum(raw["candidate"])) / 1000.0
        audit_calls = sum(sum(times) for times in raw.get("sync_audit", {}).values()) / 1000.0
        audit_samples = sum(sum(times) for times in raw.get("audit_samples", {}).values()) / 1000.0
        yield turns[0], raw, batched, audit_calls, audit_samples, (job, result)


# The sweep's start, in the order its steps come (``sweep_start``): from the process's start, when each was first seen.
SWEEP_START_STEPS = (
    "fork_server_started",
    "fork_server_ready",
    "sweep_started",
    "first_slot_taken",
    "first_worker_started",
    "first_job_given",
    "first_job_started",
    "first_device_work",
    "first_measurement",
)


def sweep_start(manifest: dict, results) -> dict | None:
    """Where the start of the run's last invocation went, in seconds from its process's start (``from``; from its
    sweep's start where the process is older than the run: ``main`` given its arguments): its first fork server
    started and ready to fork (the local executor's), the sweep started (the set-up's end), the first slot taken, the
    first worker started, given its job and starting it, the first device work (a window of a lane's token) and the
    first measurement's turn. Of the evaluations whose slots that invocation took; a step is None where nothing
    recorded it (another executor, no evaluation dispatched). On the H200 machine the first measurement came 8.1 s
    after the process started, the fork server's imports the step it waited on (BENCHMARKS.md, forty-sixth session);
    None for runs from before this was kept (forty-seventh)."""
    last = manifest.get("last_invocation")
    if not last:
        return None
    sweep = float(last["sweep_started"])
    origin = last.get("process_started") or sweep
    first: dict[str, float] = {"sweep_started": sweep}

    def seen(step: str, when) -> None:
        if when is not None:
            first[step] = min(first.get(step, when), when)

    for _, result in results:
        taken = result.environment.get("lane", {}).get("slot", {}).get("taken")
        if taken is None or taken < sweep:  # never dispatched, or by an earlier invocation
            continue
        seen("first_slot_taken", taken)
        sandbox = result.environment.get("sandbox", {})
        seen("fork_server_started", sandbox.get("fork_server_started"))
        seen("fork_server_ready", sandbox.get("fork_server_ready"))
        seen("first_worker_started", sandbox.get("process_started"))
        seen("first_job_given", sandbox.get("job_given"))
        seen("first_job_started", result.started_at or None)
        for start, _, mode in token_windows(result.environment.get("device_token", {})):
            seen("first_device_work", start)
            if mode == EXCLUSIVE:
                seen("first_measurement", start)
    steps = {step: (first[step] - origin if step in first else None) for step in SWEEP_START_STEPS}
    return {"from": "process start" if last.get("process_started") else "sweep start", **steps}


def slot_parts(results) -> dict | None:
    """Where the evaluations' slots (``executor.in_flight`` per lane) spent their time, summed over the
    evaluations, in parts that add up to each slot's time from taking an evaluation to having read the GPU
    after it: a slot waiting at the health gate or for memory holds no evaluation's work, and the lane runs
    out of measurements to take when too many wait (BENCHMARKS.md, fifteenth session). A second try's
    first (``first_try``) is a part of its own. Results never dispatched (no candidate) have no slot; None
    where no result has one (runs from before the fifteenth session)."""
    parts = dict.fromkeys([name for name, _, _ in _SLOT_STEPS] + [FIRST_TRY], 0.0)
    seen = False
    for _, result in results:
        slot = result.environment.get("lane", {}).get("slot")
        if not slot or "read_after" not in slot:
            continue
        seen = True
        marks = {**slot, "started_at": result.started_at, "finished_at": result.finished_at}
        for name, start, end in _SLOT_STEPS:
            parts[name] += marks[end] - marks[start]
        first = slot.get(FIRST_TRY)
        if first:  # inside the admission step's span: its own part
            parts[FIRST_TRY] += first["ran"] - first["admitted"]
            parts["memory_admission"] -= first["ran"] - first["admitted"]
    return parts if seen else None


def _overlapping(intervals: list[tuple[float, float]]) -> int:
    """How many of ``intervals`` (sorted by start) begin before an earlier one has ended."""
    count, reach = 0, float("-inf")
    for start, end in intervals:
        count += start < reach
        reach = max(reach, end)
    return count


class BadInput(Exception):
    """Paths a command cannot compare: one line for its user, exit 2."""


class CommandFailed(Exception):
    """A run or tool a command started ended badly: one line for its user (the run's own output above it), exit 1."""


def repeat(run_a: Path, run_b: Path, *more_pairs: Path, floors: tuple[Path, ...] = ()) -> dict:
    """Per task and method, how far the speedup moved between two runs, which side moved, and whether
    that is more than the runs' own noise estimates allow: ``z`` is the move over the two runs' noises
    together (each run's ratio noise and, where it sampled several placements, their standard error),
    which for well-calibrated estimates exceeds 2 for about one pair in twenty (``beyond_noise``).

    Further pairs (``A2 B2 ...``: the parts of a suite run as ``suite.shard=K/N``, each pair back to back on one
    machine) join the same figures; a task and method may be in one pair only.

    ``floors``: outputs of ``runner.bench processes --method M`` (``process_modes``). Each task and method they
    cover gets ``process_floor_pct``, how far its speedup lay apart between fresh processes, which no measurement
    inside one process narrows; ``beyond_process_floor`` gives each group's moves less their floors (none below
    zero; a task without a floor keeps its whole move)."""
    runs = [run_a, run_b, *more_pairs]
    if len(runs) % 2:
        raise BadInput(f"repeat compares pairs of runs (A B [A2 B2 ...]); got {len(runs)} runs")
    floor_of = _process_floors(floors)

    def speedups(run_dir):
        out = {}
        for job, result in job_results(run_dir):
            if result.verdict.status == "correct" and result.timing:
                key = (job["meta"]["method"], result.task_id)
                timing = result.timing
                medians = (timing.reference.median_ms, timing.candidate.median_ms)
                noise = math.hypot(timing.ratio_noise, timing.placement_noise or 0.0)
                kernels = ran_configs(result.autotuning)
                out[key] = _Measured(
                    level=job["task"]["level"],
                    speedup=timing.speedup,
                    noise=noise,
                    medians_ms=medians,
                    spread=timing.placement_spread,
                    ran=kernels,
                    clock=timing.sm_clock_mhz,
                    samples=samples_path(run_dir, result.eval_id),
                    preloads_not_done=preloads_not_done(result.environment),
                    led=led_shares(timing),
                )
        return out

    paired: dict[tuple[str, str], tuple[_Measured, _Measured]] = {}
    for first_run, second_run in zip(runs[0::2], runs[1::2]):
        a, b = speedups(first_run), speedups(second_run)
        for key in set(a) & set(b):
            if key in paired:
                raise BadInput(f"{key[1]} ({key[0]}) is in more than one pair of runs")
            paired[key] = (a[key], b[key])
    deltas: dict[str, list[float]] = {}
    beyond_floor: dict[str, list[float]] = {}
    samples_of: dict[tuple[str, str], tuple[Path, Path]] = {}  # each pair's samples files
    moved = []
    for key in sorted(paired):
        first, second = paired[key]
        group = f"{key[0]}, {'blocks (level 3)' if first.level >= 3 else 'ops and fusions (levels 1-2)'}"
        delta = abs(first.speedup / second.speedup - 1)
        deltas.setdefault(group, []).append(delta)
        noise = math.hypot(first.noise, second.noise)
        row = {
            "method": key[0],
            "task": key[1],
            "group": group,
            "abs_delta_pct": 100 * delta,
            "speedups": [first.speedup, second.speedup],
            "noise_pct": [100 * first.noise, 100 * second.noise],
            "placement_spread_pct": [None if s is None else 100 * s for s in (first.spread, second.spread)],
            # Which side moved: each side's median from the first run to the second, in percent.
            "reference_moved_pct": 100 * (second.medians_ms[0] / first.medians_ms[0] - 1),
            "candidate_moved_pct": 100 * (second.medians_ms[1] / first.medians_ms[1] - 1),
            "z": delta / noise if noise > 0 else math.inf,
            # Whether both runs' candidates ran their kernels with the same configs (AUTOTUNING_STATES); where they
            # did not, which kernels differed.
            "autotuning": kernels_alike(first.ran, second.ran),
            # Each run's median SM clock over its kept batches.
            "sm_clock_mhz": [first.clock, second.clock],
            # Whose kernels the worker could not load by capture at some shape, in either run (``preloads_not_done``).
            "preload_not_done": sorted(first.preloads_not_done | second.preloads_not_done),
            # Each run's share of each side's samples that started behind a lead, in percent (``led_shares``).
            "led_pct": [first.led, second.led],
        }
        if row["autotuning"] == "different":
            row["kernels_differing"] = kernels_differing(first.ran, second.ran)
        if floors:
            row["process_floor_pct"] = floor = floor_of.get(key)
            beyond_floor.setdefault(group, []).append(max(0.0, delta - (floor or 0.0) / 100))
        moved.append(row)
        samples_of[key] = (first.samples, second.samples)
    beyond = [row for row in moved if row["z"] > 2]
    largest = sorted(moved, key=lambda row: -row["abs_delta_pct"])[:_LARGEST]
    for row in largest:  # whether the clocks explain the move (runner/analysis/clock_mix.py): their samples read
        first_raw, second_raw = (read_samples(path) for path in samples_of[(row["method"], row["task"])])
        row["at_matched_clocks"] = moved_at_matched_clocks(first_raw, second_raw) if first_raw and second_raw else None
    figures = {
        "pairs": len(paired),
        "runs": [path.name for path in runs],
        "abs_delta_speedup": {group: _quantiles(values) for group, values in sorted(deltas.items())},
        "beyond_noise": {
            "z_median": statistics.median(row["z"] for row in moved) if moved else None,
            "z_over_2": len(beyond),
            "z_over_2_pct": 100 * len(beyond) / len(moved) if moved else None,
        },
        # How many pairs ran their autotuned kernels alike (runner/worker/autotuning.py): two cold compiles may not.
        "autotuning": {state: sum(row["autotuning"] == state for row in moved) for state in AUTOTUNING_STATES},
        # The pairs whose worker's preload capture failed at some shape (a host read inside it, say), among all and
        # among the largest: they held 5 of torch_compile's 11 largest moves on the H200 (fifty-seventh session).
        "preload_not_done": {
            "pairs": sum(bool(row["preload_not_done"]) for row in moved),
            "in_largest": sum(bool(row["preload_not_done"]) for row in largest),
        },
        # Which tasks moved most: a quantile over the target is a question about these.
        "largest": largest,
        "duty": [duty(run) for run in runs],
    }
    if floors:
        figures["beyond_process_floor"] = {
            "floors": [str(path) for path in floors],
            "tasks_with_a_floor": sum(1 for key in paired if key in floor_of),
            "abs_delta_speedup": {group: _quantiles(values) for group, values in sorted(beyond_floor.items())},
        }
    return figures


class _Measured(NamedTuple):
    """One task and method's measurement in one run, as ``repeat`` compares it with the other run's."""

    level: int
    speedup: float
    noise: float  # the ratio noise and the placements' standard error together
    medians_ms: tuple[float, float]  # reference, candidate
    spread: float | None  # the placements' spread
    ran: object  # the autotuned kernels' configs (``ran_configs``)
    clock: float | None  # median SM clock
    samples: Path
    preloads_not_done: set[str]
    led: dict | None  # ``led_shares``


def led_shares(timing) -> dict | None:
    """Per side, the share of its samples that started behind a lead (``samplers.QueueLead``: the GPU's queue held less
    than their host time), in percent; None where the measurement did not lead (the host clock,
    ``eval.timing.lead_dry_queue`` off, or a run from before the fifty-eighth session)."""
    if timing.led_samples is None:
        return None
    sides = {"reference": timing.reference, "candidate": timing.candidate}
    return {side: 100 * timing.led_samples.get(side, 0) / max(summary.samples, 1) for side, summary in sides.items()}


def preloads_not_done(environment: dict) -> set[str]:
    """The sides ("reference", "candidate") whose preload (``runner/worker/preload.py``) recorded a shape as not
    done: its capture failed. A preload not tried at all (no CUDA device, or switched off) is no failure."""
    records = {"reference": "preloaded_kernels", "candidate": "preloaded_candidate"}
    return {
        side
        for side, record in records.items()
        if any(
            str(state).startswith("not done")
            for state in ((environment.get(record) or {}).get("shapes") or {}).values()
        )
    }


def _process_floors(paths: tuple[Path, ...]) -> dict[tuple[str, str], float]:
    """``{(method, task): speedup spread between processes, in percent}`` from ``processes`` outputs."""
    floors: dict[tuple[str, str], float] = {}
    for path in paths:
        try:
            figures = json.loads(Path(path).read_text())
            covered = {(figures["method"], task): row["speedup_spread_pct"] for task, row in figures["tasks"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise BadInput(f"{path} is not the output of `python -m runner.bench processes`") from None
        clashes = sorted(covered.keys() & floors.keys())
        if clashes:
            raise BadInput(f"{clashes[0][1]} ({clashes[0][0]}) has a floor in more than one file")
        floors |= covered
    return floors


_LARGEST = 10  # tasks listed by ``repeat`` as having moved most between the passes


def overlap(run_a: Path, run_b: Path) -> dict:
    def windows(run_dir):
        return [tuple(r.timing.window) for _, r in job_results(run_dir) if r.timing and r.timing.window]

    first, second = windows(run_a), windows(run_b)
    clashes = [(w, v) for w in first for v in second if w[0] < v[1] and v[0] < w[1]]
    return {"windows": [len(first), len(second)], "overlapping_pairs": len(clashes), "examples": clashes[:3]}


_NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def ncu(profile_csv: Path, run_dir: Path) -> dict:
    """``profile_csv``: ``ncu --csv --metrics gpu__time_duration.sum`` output with NVTX range ``task_id``."""
    import csv

    kernel_ms: dict[str, float] = {}
    with profile_csv.open() as handle:
        lines = [line for line in handle if line.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        match = re.search(r"<default domain>:([^:]+):", row.get(_NVTX_COLUMN, ""))
        task = match.group(1) if match else row.get("Kernel Name", "?")
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}[unit]
        kernel_ms[task] = kernel_ms.get(task, 0.0) + value * scale
    ours = {r.task_id: r.timing.reference.median_ms for _, r in job_results(run_dir) if r.timing}
    rows = [
        {
            "task": task,
            "ncu_ms": kernel_ms[task],
            "kbench_ms": ours[task],
            "diff_pct": 100 * (ours[task] / kernel_ms[task] - 1),
        }
        for task in sorted(set(kernel_ms) & set(ours))
    ]
    diffs = [abs(r["diff_pct"]) for r in rows]
    return {
        "tasks": rows,
        "max_abs_diff_pct": max(diffs) if diffs else None,
        "median_abs_diff_pct": statistics.median(diffs) if diffs else None,
    }


def profile(*task_ids: str) -> dict:
    """Each task's reference at its performance shape, one call per NVTX range named by the task
    (three warm-up calls outside it): the driver that ``ncu --nvtx`` profiles."""
    import torch

    from runner.paths import TASKS_DIR
    from runner.tasks.loader import load_native_tasks
    from runner.worker.loading import build_model, import_file, make_inputs

    device = torch.device("cuda")
    by_id = {task.task_id: task for task in load_native_tasks(TASKS_DIR)}
    unknown = [task_id for task_id in task_ids if task_id not in by_id]
    if unknown:
        raise SystemExit(f"kbench bench: unknown task(s) {', '.join(unknown)}")
    for task in (by_id[task_id] for task_id in task_ids):
        module = import_file(task.path, f"kbench_profile_{task.task_id}")
        dims = task.shapes["perf"]
        with torch.no_grad():
            model = build_model(module.Model, module, dims, device, 0)
            inputs = make_inputs(module, dims, device, 1)
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(task.task_id)
            model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    return {"profiled": list(task_ids)}


def processes_command(argv: list[str]) -> int:
    """``processes [--processes N] [--method M] [--samples N] [--device D] [--shape S] [--hold-fraction F]
    TASK_OR_CATEGORY...``: each named task (a category: all of its tasks), its reference and method M's candidate,
    timed in N fresh processes, each holding its share of F of the GPU's free memory first
    (``runner/process_modes.py``)."""
    import argparse

    from runner.methods import METHODS
    from runner.paths import TASKS_DIR
    from runner.process_modes import HOLD_FRACTION, MAX_HOLD_FRACTION, process_modes
    from runner.registry import UnknownName
    from runner.tasks.loader import load_native_tasks

    parser = argparse.ArgumentParser(prog="python -m runner.bench processes")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--method", default="reference", help="whose candidate is timed against the reference")
    parser.add_argument("--samples", type=int, default=120)
    parser.add_argument("--device", default="auto", help="cuda, cuda:N or cpu; auto: the GPU where there is one")
    parser.add_argument("--shape", default="auto", help="auto: perf on a GPU, small on a CPU")
    parser.add_argument(
        "--hold-fraction",
        type=float,
        default=HOLD_FRACTION,
        help="on a GPU, the share of its free memory the last process holds before its tensors (the others in "
        "proportion, the first none): each process's tensors at another depth of the GPU's memory; 0: none",
    )
    parser.add_argument("names", nargs="+", metavar="TASK_OR_CATEGORY")
    args = parser.parse_args(argv)
    if args.processes < 2 or args.samples < 4:
        print("kbench bench processes: --processes needs 2 or more, --samples 4 or more", file=sys.stderr)
        return 2
    if not 0 <= args.hold_fraction <= MAX_HOLD_FRACTION:
        print(f"kbench bench processes: --hold-fraction must lie in [0, {MAX_HOLD_FRACTION}]", file=sys.stderr)
        return 2
    try:
        METHODS.get(args.method)
    except UnknownName as exc:
        print(f"kbench bench processes: {exc}", file=sys.stderr)
        return 2
    tasks = load_native_tasks(TASKS_DIR)
    chosen, unknown = [], []
    for name in args.names:
        matched = [t for t in tasks if name in (t.task_id, t.category)]
        if not matched:
            unknown.append(name)
        chosen += [t for t in matched if t not in chosen]
    if unknown:
        print(f"kbench bench processes: no task or category named {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        paths = [str(t.path) for t in chosen]
        figures = process_modes(
            paths, args.processes, args.method, args.device, args.shape, args.samples, args.hold_fraction
        )
    except RuntimeError as exc:
        print(f"kbench bench processes: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(figures, indent=1))
    return 0


def _paths_taken(command) -> str:
    """A command's paths as its usage names them, from its signature: ``RUN_A RUN_B [MORE_PAIRS...]``."""
    names = []
    for parameter in inspect.signature(command).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY:
            continue  # an option (repeat's --floor), not a path
        name = parameter.name.upper()
        names.append(f"[{name}...]" if parameter.kind is parameter.VAR_POSITIONAL else name)
    return " ".join(names)


def _accuracy(out: Path) -> dict:
    """``accuracy OUT``: ``bench_protocol.accuracy`` (its own module: it runs kbench and ncu)."""
    from runner.bench_protocol import accuracy

    return accuracy(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["profile"]:
        print(json.dumps(profile(*argv[1:])))
        return 0
    if argv[:1] == ["processes"]:
        return processes_command(argv[1:])
    if argv[:1] == ["all"]:
        from runner.bench_protocol import protocol_command

        return protocol_command(argv[1:])
    commands = {
        "repeat": repeat,
        "overlap": overlap,
        "ncu": ncu,
        "duty": duty,
        "accuracy": _accuracy,
        "disturbed": disturbances,
        "paced": host_pace,
        "autotune": autotune_choices,
    }
    if not argv or argv[0] not in commands:
        print(
            f"usage: python -m runner.bench {{{'|'.join(commands)}|all|processes|profile}} PATH [PATH]", file=sys.stderr
        )
        return 2
    words, floors = argv[1:], []
    while "--floor" in words:  # repeat's processes outputs: --floor FILE, as often as there are files
        at = words.index("--floor")
        if argv[0] != "repeat" or at + 1 == len(words):
            print(f"kbench bench {argv[0]}: --floor takes a file of `processes`, and only for repeat", file=sys.stderr)
            return 2
        floors.append(Path(words[at + 1]))
        del words[at : at + 2]
    paths = [Path(p) for p in words]
    creates = argv[0] == "accuracy"
    missing = [str(p) for p in paths + floors if not p.exists() and not creates]
    if missing:
        print(f"kbench bench: no such file or run directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    keywords = {"floors": tuple(floors)} if floors else {}
    try:
        inspect.signature(commands[argv[0]]).bind(*paths, **keywords)
    except TypeError:
        print(f"kbench bench {argv[0]}: takes {_paths_taken(commands[argv[0]])}; got {len(paths)}", file=sys.stderr)
        return 2
    try:
        figures = commands[argv[0]](*paths, **keywords)
    except (BadInput, NotACache) as exc:
        print(f"kbench bench {argv[0]}: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"kbench bench {argv[0]}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    # The package's own module, not this ``__main__`` copy: the errors that bench_protocol raises are its classes.
    from runner.bench import main as package_main

    sys.exit(package_main(sys.argv[1:]))
