"""Stretches of time as ``(start, end)`` pairs: how long their union lasts (``union_seconds``), for the duty figures
(``runner.bench``) and the compile warm-up's summary (``runner/warmup_beside.py``)."""

from __future__ import annotations

from collections.abc import Iterable


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``intervals`` (overlapping stretches counted once)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
