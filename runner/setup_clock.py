"""A run's set-up before its sweep, timed in named parts: ``manifest.json``'s ``setup_s`` and ``setup_parts_s``.

``kbench run`` spends seconds before its first evaluation: the interpreter's start and kbench's own imports, the
configuration and the tasks, the executor's checks, the GPU readings (MLflow's import, store and parent run, until they
opened beside the sweep: ``runner/tracking/opening.py``, which times its parts on a clock of this kind).
``runner.bench duty`` counts them against the duty (``duty_with_setup_pct``); the parts say which one to shorten.
On an H200 the whole suite's set-up took 8.4 s where this machine's took 2.7 s (BENCHMARKS.md, forty-fifth session),
and nothing then said where. This module only reads clocks: it starts, stops and changes nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def seconds_since_process_start(proc: Path = Path("/proc")) -> float | None:
    """How long ago this process started (Linux's ``/proc``, to the kernel's clock tick); None where it cannot say."""
    try:
        # The command's name (field 2) may hold spaces and parentheses: the fields after its last ')' are plain.
        fields = (proc / "self" / "stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22, starttime: clock ticks after boot
        uptime = float((proc / "uptime").read_text().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started_ticks / ticks)


class SetupClock:
    """Seconds spent in each named part of the set-up, in the order marked.

    ``mark(name)`` gives the time since the last mark (or since the clock was made) to ``name``. With
    ``from_process_start`` (a process started for this run), the first part, ``interpreter``, is the time from the
    process's start to the clock's: Python's start and kbench's imports. A caller in an older process (``main``
    given its arguments) has no such part: its process's age is not the run's."""

    def __init__(self, from_process_start: bool = True) -> None:
        self._last = time.perf_counter()
        before = seconds_since_process_start() if from_process_start else None
        self.parts: dict[str, float] = {} if before is None else {"interpreter": before}
        # When the process started, epoch seconds as the results' times (None where its age is not the run's).
        self.process_started: float | None = None if before is None else time.time() - before

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] = self.parts.get(name, 0.0) + now - self._last
        self._last = now

    def total(self) -> float:
        return sum(self.parts.values())


def added_parts(earlier: dict[str, float] | None, now: dict[str, float]) -> dict[str, float]:
    """A resumed run's parts: each invocation's seconds added to those of the earlier ones, rounded to the ms."""
    merged = dict(earlier or {})
    for name, seconds in now.items():
        merged[name] = merged.get(name, 0.0) + seconds
    return {name: round(seconds, 3) for name, seconds in merged.items()}
