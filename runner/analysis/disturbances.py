"""Disturbed batches: which timed batches something slowed, and what else happened on the GPU meanwhile.

``python -m runner.bench disturbed RUN_DIR``. A batch is disturbed when one side's batch median lies far
above that side's other batches: more than ``Z_LIMIT`` scaled median absolute deviations over the median
of its batch medians, and more than ``MIN_EXCESS`` of it. The measurement's median absorbs such a batch,
but it moves a placement's speedup and the noise estimates (BENCHMARKS.md, twelfth session), so where
they come from matters. The candidates checked are the device work that the device token does not
order: another worker making its CUDA context (a spare, ``environment.spare_cuda_context``) or pre-warming after it
(``spare_prewarm``, ``environment.spare_prewarm_window``: the check kernels compiled or loaded into its context, the
profiler's start and stop, the compiler's host steps; ``runner/worker/prewarm.py``), the same of the spares the run
dismissed without a job (each a line of ``spares.jsonl``, ``runner/executors/base.py``: a run's last spares, and in a
short run all of them, started as its first evaluations start and never recorded in a result), and a
finished worker's exit, when the driver tears its context down and frees its memory (from its
``finished_at`` for ``EXIT_WINDOW_S``), and a worker loading its reference's kernels by capturing its calls
(``environment.preloaded_kernels.window``, ``runner/worker/preload.py``: allocations and two one-element fills
per capture), or its compiled candidate's (``environment.preloaded_candidate.window``: the compile too, host
work). A compile warm-up beside the sweep (``warmup.jsonl``, ``runner/warmup_beside.py``) adds its process's
events: its CUDA context (``warmup_context``, made off the token like a spare's), each of its compiles
(``warmup_compile``: off the token, host work that loads the compiled kernels into the context at its end) and its
end (``warmup_exit``: its context reset, then the exit, from its ``finished_at``, or from the line's ``ended`` in a
run from before the fifty-third session, for ``EXIT_WINDOW_S``). Its token windows are not candidates: they never
overlap a turn. Every batch is checked the same way, so the share of disturbed batches that overlap such an event
can be held against the share of all batches that do (chance). The batches are also counted by when they ran, with
the share disturbed in each bin: from their measurement's first batch (``by_time_in_turn``) and from the last exit
of another worker, an evaluation's or a warm-up's, before they ended (``by_time_since_exit``), and from the start of
the device's busy stretch, timed batches of any evaluation with no gap of ``IDLE_GAP_S`` between them
(``by_time_since_idle``). In a warm torch_compile pass on the H200, 6-13% of the batches in a turn's first 1.25 s were
disturbed and 0-1% after, and 14-16% of those ending 0.5-1 s after another worker's exit (BENCHMARKS.md, fifty-sixth
session). In six four-task torch_compile runs on an H100, each run one stretch from its first turn on
(transpose_2d_bf16's in five of them), 35% of the batches in the stretch's first 1.5 s were disturbed, 16% in the next
second, none of the 27 from 2.5 to 3 s and 3.1% after (BENCHMARKS.md, seventy-eighth session).
The timing loop records each batch's window (``batch_window`` in ``samples.json``, from the twelfth
session on); a run without them gives no batches. A batch whose measuring thread waited, runnable, for a host
core for more than ``HOST_WAIT_MIN_MS`` while it was in flight (``batch_host_wait_ms``,
``runner/worker/host_cpu.py``; from the fifty-seventh session on) counts as near a ``host_wait``: other work on
its core. Over a cold torch_compile pass of half the suite on the H200, 0.8% of the batches did, 0.36% of the
disturbed ones (BENCHMARKS.md, fifty-seventh session).
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from pathlib import Path

from runner.analysis.records import job_results, samples_path
from runner.executors.base import SPARES_LOG
from runner.warmup_beside import warmup_windows
from runner.worker.protocol import SIDES, batch_medians

Z_LIMIT = 5.0
MIN_EXCESS = 0.005
EXIT_WINDOW_S = 2.0
# A batch's measuring thread waiting this long for a core is a ``host_wait`` (a scheduler's time slice is 0.75-3 ms;
# a wake-up's own latency is microseconds).
HOST_WAIT_MIN_MS = 0.25
# The kinds of event a compile warm-up beside the sweep adds (``_warmup_events``).
WARMUP_KINDS = ("warmup_context", "warmup_compile", "warmup_exit")
_MAD_TO_SIGMA = 1.4826
# ``by_time_in_turn`` and ``by_time_since_exit``: bins this wide, the last from ``WHEN_BINS * WHEN_BIN_S`` on (and,
# since an exit, batches with none before them).
WHEN_BIN_S = 0.25
WHEN_BINS = 12
# ``by_time_since_idle``: no timed batch for this long, and the device's next batch begins a busy stretch (between two
# turns of a run the device waited 0.07-0.5 s in the seventy-eighth session's runs).
IDLE_GAP_S = 1.0
_LISTED = 10


def disturbances(run_dir: Path) -> dict:
    """The disturbed batches of a run, and how many overlap each kind of event, against all batches."""
    results = job_results(run_dir)
    events = []  # (kind, eval_id, start, end)
    for _, result in results:
        window = result.environment.get("spare_cuda_context")
        if window:
            events.append(("cuda_context", result.eval_id, window[0], window[1]))
        window = result.environment.get("spare_prewarm_window")
        if window:
            events.append(("spare_prewarm", result.eval_id, window[0], window[1]))
        if result.finished_at:
            events.append(("worker_exit", result.eval_id, result.finished_at, result.finished_at + EXIT_WINDOW_S))
        for record, kind in (("preloaded_kernels", "preload"), ("preloaded_candidate", "candidate_preload")):
            window = result.environment.get(record, {}).get("window")
            if window:
                events.append((kind, result.eval_id, window[0], window[1]))
    events += _warmup_events(run_dir) + _dismissed_spare_events(run_dir)
    kinds = ("cuda_context", "spare_prewarm", "worker_exit", "preload", "candidate_preload", *WARMUP_KINDS, "host_wait")
    counts = {kind: {"all": 0, "disturbed": 0} for kind in kinds}
    exits = sorted((start, owner) for kind, owner, start, _ in events if kind in ("worker_exit", "warmup_exit"))
    in_turn, since_exit, since_idle = _Bins(), _Bins(), _Bins()
    disturbed, timed = [], []  # timed: every batch's (start, end, disturbed)
    for _, result in results:
        path = samples_path(run_dir, result.eval_id)
        if not result.timing or not path.exists():
            continue
        raw = json.loads(path.read_text())
        windows = raw.get("batch_window") or []
        size = len(raw["reference"]) // len(windows) if windows else 0
        waits = raw.get("batch_host_wait_ms") or [None] * len(windows)
        excess = {side: _excess(raw[side], size, len(windows)) for side in SIDES}
        for k, (start, end) in enumerate(windows):
            near = {kind for kind, owner, s, e in events if owner != result.eval_id and s < end and e > start}
            if waits[k] is not None and waits[k] > HOST_WAIT_MIN_MS:
                near.add("host_wait")
            near = sorted(near)
            is_disturbed = any(z > Z_LIMIT and rel > MIN_EXCESS for z, rel in (excess[s][k] for s in SIDES))
            in_turn.add(start - windows[0][0], is_disturbed)
            timed.append((start, end, is_disturbed))
            since_exit.add(_since_last(exits, end, result.eval_id), is_disturbed)
            for kind in near:
                counts[kind]["all"] += 1
                counts[kind]["disturbed"] += is_disturbed
            if is_disturbed:
                worst = max(SIDES, key=lambda side: excess[side][k][1])
                disturbed.append(
                    {
                        "task": result.task_id,
                        "batch": k,
                        "side": worst,
                        "excess_pct": 100 * excess[worst][k][1],
                        "near": near,
                    }
                )
    for start, is_disturbed in _since_busy(timed):
        since_idle.add(start, is_disturbed)
    batches = len(timed)
    for count in counts.values():
        count["all_pct"] = 100 * count["all"] / batches if batches else None
        count["disturbed_pct"] = 100 * count["disturbed"] / len(disturbed) if disturbed else None
    return {
        "batches": batches,
        "disturbed": len(disturbed),
        "thresholds": {
            "z": Z_LIMIT,
            "excess_pct": 100 * MIN_EXCESS,
            "exit_window_s": EXIT_WINDOW_S,
            "host_wait_ms": HOST_WAIT_MIN_MS,
        },
        "near": counts,
        "near_none": sum(not row["near"] for row in disturbed),
        "by_time_in_turn": in_turn.rows(),
        "by_time_since_exit": since_exit.rows(),
        "by_time_since_idle": since_idle.rows(),
        "largest": sorted(disturbed, key=lambda row: -row["excess_pct"])[:_LISTED],
    }


class _Bins:
    """Batches counted by a time (seconds) in bins of ``WHEN_BIN_S``, the last from ``WHEN_BINS`` bins on, with how
    many of each bin were disturbed."""

    def __init__(self) -> None:
        self.all = [0] * (WHEN_BINS + 1)
        self.disturbed = [0] * (WHEN_BINS + 1)

    def add(self, seconds: float, is_disturbed: bool) -> None:
        k = WHEN_BINS if seconds >= WHEN_BINS * WHEN_BIN_S else max(int(seconds / WHEN_BIN_S), 0)
        self.all[k] += 1
        self.disturbed[k] += is_disturbed

    def rows(self) -> list[dict]:
        return [
            {
                "from_s": k * WHEN_BIN_S,
                "batches": n,
                "disturbed": hit,
                "disturbed_pct": 100 * hit / n if n else None,
            }
            for k, (n, hit) in enumerate(zip(self.all, self.disturbed))
        ]


def _since_last(exits: list[tuple[float, str]], before: float, own: str) -> float:
    """Seconds from the last exit in ``exits`` (sorted (time, owner)) before ``before`` that is not ``own``'s, to
    ``before``; infinite where there is none."""
    for at, owner in reversed(exits[: bisect.bisect_left(exits, (before, ""))]):
        if owner != own:
            return before - at
    return math.inf


def _since_busy(timed: list[tuple[float, float, bool]]) -> list[tuple[float, bool]]:
    """Per timed batch (start, end, disturbed), of any evaluation: (seconds from the start of the device's busy
    stretch it lies in, disturbed). A stretch begins at a batch that starts ``IDLE_GAP_S`` or more after every batch
    before it has ended (the run's first batch begins one)."""
    found, busy_since, busy_until = [], None, -math.inf
    for start, end, is_disturbed in sorted(timed):
        if start - busy_until >= IDLE_GAP_S:
            busy_since = start
        busy_until = max(busy_until, end)
        found.append((start - busy_since, is_disturbed))
    return found


def _warmup_events(run_dir: Path) -> list[tuple[str, str, float, float]]:
    """The device events of the run's compile warm-ups beside the sweep, as ``disturbances``' events. Each is owned by
    ``warmup:EVAL_ID``: a warm-up's process is never the measuring one (its evaluation waits for it)."""
    events = []
    for line in warmup_windows(run_dir):
        owner = f"warmup:{line.get('eval_id')}"
        window = line.get("spare_cuda_context")
        if window:
            events.append(("warmup_context", owner, window[0], window[1]))
        for start, end in line.get("compiles") or []:
            events.append(("warmup_compile", owner, start, end))
        finished = line.get("finished_at") or line.get("ended")
        if finished:
            events.append(("warmup_exit", owner, finished, finished + EXIT_WINDOW_S))
    return events


def _dismissed_spare_events(run_dir: Path) -> list[tuple[str, str, float, float]]:
    """The CUDA contexts and pre-warms of the spares the run dismissed without a job (``SPARES_LOG``), as
    ``disturbances``' events, each owned by ``spare:PID`` (never a measuring process); a line that cannot be read is
    skipped, as is a spare that had not finished its start (it wrote no record)."""
    path = run_dir / SPARES_LOG
    if not path.exists():
        return []
    events = []
    for text in path.read_text().splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if not isinstance(line, dict):
            continue
        owner = f"spare:{line.get('pid')}"
        for key, kind in (("spare_cuda_context", "cuda_context"), ("spare_prewarm_window", "spare_prewarm")):
            window = line.get(key)
            if isinstance(window, list) and len(window) == 2:
                events.append((kind, owner, window[0], window[1]))
    return events


def _excess(values: list[float], size: int, count: int) -> list[tuple[float, float]]:
    """Per batch of one side: (robust z of its median over the batch medians, its excess over their median)."""
    if count < 3 or size == 0:
        return [(0.0, 0.0)] * count
    medians = batch_medians(values, size, count)
    centre = statistics.median(medians)
    spread = _MAD_TO_SIGMA * statistics.median(abs(m - centre) for m in medians)
    floor = max(spread, 1e-9 * abs(centre))  # identical batches: any excess at all stands out
    return [((m - centre) / floor, (m - centre) / centre if centre else 0.0) for m in medians]
