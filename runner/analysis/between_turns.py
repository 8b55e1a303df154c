"""Where the time between consecutive measurements' turns went (``between_turns``): hand-overs, and the longer gaps
with what the lane's slots and the next measurement were doing meanwhile and whom it waited for."""

from __future__ import annotations

import statistics

from runner.analysis.slot_states import SLOT_STATES, UNKNOWN_STATE, WARMUP_TASK, seconds_in_states, state_at
from runner.intervals import union_seconds
from runner.worker.device_token import EXCLUSIVE

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
    1.8 s of it one gap: BENCHMARKS.md, twenty-second session). ``without_first_phases``: the longer gaps with no
    first shared phase in them, hand-overs that outlasted ``HAND_OVER_S`` (a slow warm-up beside long checks after
    timing) rather than cohorts.

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
    alone: list[float] = []  # the longer gaps with no evaluation's first shared phase in them
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
            if not inside:
                alone.append(start - gap_from)
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
            "without_first_phases": part(alone),
            "waited_for_slowest_s": sum(gap["window_s"] - gap["next_slowest_s"] for gap in beyond_second),
            "slowest": beyond_second[:SLOWEST_SHOWN],
            "next_measured_s": next_measured,
            "slots_s": slot_seconds,
            "warmup_windows_s": warmup_seconds,
            "waited_for_turn": {"s": sum(waits), "held_by_s": held_by, "ended_by": ended_by},
        },
    }


def _add_seconds(totals: dict[str, float], seconds: dict[str, float]) -> None:
    for state, value in seconds.items():
        totals[state] = totals.get(state, 0.0) + value
