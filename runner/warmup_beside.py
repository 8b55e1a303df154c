"""The compile warm-up beside the sweep (``executor.warmup_beside``): candidates compiled while others measure.

Before, the warm-up ran a chunk of candidates with the device's token held exclusive from the orchestrator, and
no evaluation ran meanwhile: on the H100 a cold torch_compile pass over the suite spent 130.6 s of its 704 s so
(duty 70.1%, against 90.0% for the same pass with warm caches; BENCHMARKS.md, thirty-fourth session). Here the
warm-up workers start with the sweep and keep ahead of it, in plan order, ``warmup_workers`` at a time, and each
evaluation whose candidate is warmed starts only once its warm-up has ended (so it finds its kernels on disk,
as before). Nothing measured shares the GPU with a warm-up: a warm-up worker holds the device's token shared for
its device work, in windows that wait for the measurement in its turn but not for the queue of ready ones
(``DeviceToken(cuts_in=True)``: waiting at the ready gate, as an evaluation's first phase does, the warm-ups spent
4,086 of their 5,130 s on the H200 waiting and held the sweep back), and lets go of it while Dynamo and Inductor
compile (``runner/worker/warmup.py``), at the lowest CPU priority, so compiling costs the measurements host time
only where a core is free. Each warm-up's windows (token held, compiling) are kept in the run directory
(``WARMUP_LOG``) for ``runner.bench duty`` and the tests.

Cutting in costs the hand-over it lands in: the next measurement waits for the windows that came in beside its
approach (a window ran 0.109 s, median, where a hand-over takes 30-40 ms), while a cohort's gap (the lane's ready
measurements run dry, newcomers' first phases) holds windows for little more than it lasts anyway. With
``cut_in_within`` set, a warm-up's windows wait at the ready gate, for such gaps, until the sweep needs it soon:
its evaluation among the next ``cut_in_within`` the sweep will start (``coming``), or the sweep waiting for it;
from then on they cut in (``CutIn``, ``runner/worker/device_token.py``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

from runner.intervals import union_seconds
from runner.worker.protocol import CUT_IN_FILE

# One line per warm-up: which evaluation, its exit code, when it ran and its windows (``warmup_record``).
WARMUP_LOG = "warmup.jsonl"
# How often a sweep thread waiting for a warm-up looks whether the sweep was stopped.
POLL_S = 0.2


class CutIn:
    """When one warm-up's windows start to cut in: told (``tell``) through ``CUT_IN_FILE`` in its job's ``out/``,
    written once the warm-up's job directory is there (``place``); ``told_at``: when (epoch seconds), or None."""

    def __init__(self) -> None:
        self.told_at: float | None = None
        self._out_dir: Path | None = None
        self._lock = threading.Lock()

    def place(self, out_dir: Path) -> None:
        """The warm-up's job is in ``out_dir``'s directory (told already: the file is written now)."""
        with self._lock:
            self._out_dir = out_dir
            if self.told_at is not None:
                self._write()

    def tell(self) -> None:
        with self._lock:
            if self.told_at is None:
                self.told_at = time.time()
                if self._out_dir is not None:
                    self._write()

    def _write(self) -> None:
        try:
            (self._out_dir / CUT_IN_FILE).touch()
        except FileNotFoundError:
            pass  # the warm-up has ended and its directory is gone: nothing left to tell


class WarmupBeside:
    """Warm-ups of ``targets`` (evaluations, in plan order) run by ``warm`` (evaluation, its ``CutIn`` -> record
    dict with an ``exit_code``) on ``workers`` threads from construction on; ``wait_for`` holds an evaluation back
    until its warm-up has ended. A warm-up that raised counts as failed: its evaluation compiles for itself.
    ``cut_in_within``: None, every warm-up's windows cut in (``warm`` passes that on to its job); a number, each is
    told to once its evaluation is among that many next to start (``coming``) or waited for."""

    def __init__(
        self,
        targets: Iterable,
        warm: Callable[[object, CutIn], dict],
        workers: int,
        log_path: Path,
        cut_in_within: int | None = None,
    ) -> None:
        targets = list(targets)
        self.log_path = log_path
        self.cut_in_within = cut_in_within
        self._warm = warm
        self._cut_in = {id(e): CutIn() for e in targets}
        self._ended = {id(e): threading.Event() for e in targets}
        self._lock = threading.Lock()  # the counts and the log, written from the pool's threads
        self.failed = 0
        self.waits: list[float] = []  # seconds each held-back evaluation waited (0 where its warm-up had ended)
        # What the warm-ups' jobs said (``runner/worker/warmup.py``): their token windows, summed and as their union
        # in the summary (several warm-ups' windows overlap: on the H200, 106.3 s summed, 37.7 s of the pass;
        # BENCHMARKS.md, fifty-third session; the union is what the lane gave them), and the kernels they autotuned
        # with the time spent timing the configs, which is GPU work inside those windows.
        self._windows: list[tuple[float, float]] = []
        self.kernels_autotuned = 0
        self.benchmark_ms = 0.0
        self.first_start: float | None = None
        self.last_end: float | None = None
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="warmup")
        for evaluation in targets:
            self._pool.submit(self._one, evaluation)

    def _one(self, evaluation) -> None:
        started = time.time()
        with self._lock:
            self.first_start = started if self.first_start is None else min(self.first_start, started)
        cut_in = self._cut_in[id(evaluation)]
        try:
            record = self._warm(evaluation, cut_in)
        except Exception as exc:  # the sandbox could not run it: the evaluation compiles for itself
            record = {"exit_code": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            ended = time.time()
            with self._lock:
                self.last_end = ended if self.last_end is None else max(self.last_end, ended)
            self._ended[id(evaluation)].set()
        line = {"eval_id": evaluation.eval_id, "started": started, "ended": ended, **record}
        if self.cut_in_within is not None:
            line["cut_in_told"] = cut_in.told_at  # None: it ended before the sweep came near it
        autotuned = [k for k in record.get("autotuning", {}).get("kernels", []) if "benchmark_ms" in k]
        windows = record.get("token", {}).get("windows", [])
        with self._lock, self.log_path.open("a") as handle:
            self.failed += record.get("exit_code") != 0
            self._windows += [(window[0], window[1]) for window in windows]
            self.kernels_autotuned += len(autotuned)
            self.benchmark_ms += sum(kernel["benchmark_ms"] for kernel in autotuned)
            handle.write(json.dumps(line) + "\n")

    def coming(self, pending: Iterable) -> None:
        """The sweep will start ``pending``'s evaluations next, in order: the first ``cut_in_within`` warm-ups are told
        to cut in (none where every one does)."""
        if self.cut_in_within is None:
            return
        for evaluation in islice(pending, self.cut_in_within):
            cut_in = self._cut_in.get(id(evaluation))
            if cut_in is not None:
                cut_in.tell()

    def wait_for(self, evaluation, stop: threading.Event) -> bool:
        """Block until ``evaluation``'s warm-up has ended (at once where it has none; told to cut in meanwhile);
        False if ``stop`` was set first."""
        ended = self._ended.get(id(evaluation))
        if ended is None:
            return True
        if self.cut_in_within is not None and not ended.is_set():
            self._cut_in[id(evaluation)].tell()
        began = time.perf_counter()
        while not ended.wait(POLL_S):
            if stop.is_set():
                return False
        self.waits.append(time.perf_counter() - began)
        return True

    def summary(self) -> dict:
        """For the run's manifest: how many, how many failed, their span, what the sweep waited for them, their device
        windows (summed, and their union: the seconds of the pass with one open) and how much of those went to timing
        autotuning configs."""
        held_back = [w for w in self.waits if w > POLL_S]
        return {
            "candidates": len(self._ended),
            "failed": self.failed,
            "span_s": round(self.last_end - self.first_start, 3) if self.first_start and self.last_end else 0.0,
            "evaluations_held_back": len(held_back),
            "held_back_s": round(sum(held_back), 3),
            "windows_s": round(sum(end - start for start, end in self._windows), 3),
            "windows_union_s": round(union_seconds(self._windows), 3),
            "kernels_autotuned": self.kernels_autotuned,
            "autotune_benchmark_s": round(self.benchmark_ms / 1e3, 3),
        }

    def close(self, cancel: bool = False) -> None:
        """Wait for the warm-ups running now (all of them, unless ``cancel``: those not started are dropped)."""
        self._pool.shutdown(wait=True, cancel_futures=cancel)


def warmup_windows(run_dir: Path) -> list[dict]:
    """The warm-ups' lines of a run (none where its warm-up ran before the sweep)."""
    path = run_dir / WARMUP_LOG
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
