"""What an evaluation was doing from when, out of its slot's marks and its token's windows (``evaluation_states``),
and what a warm-up beside the sweep was (``warmup_states``); the seconds each slot spent in each step
(``slot_parts``). Reads the records only: what they mean for the duty is ``duty.py``'s and ``between_turns.py``'s."""

from __future__ import annotations

import bisect

from runner.worker.device_token import EXCLUSIVE

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
