"""A side's samples summarised: the median, the quartiles and the median's relative standard error (from the
interquartile range), and a ratio's noise from its two medians'. Used by every measurement (``timing.measure_pair``)
and by ``runner/process_modes.py``."""

from __future__ import annotations

import math
import statistics

from runner.worker.protocol import TimingSummary


def quartiles_of_sorted(ordered: list[float]) -> tuple[float, float, float]:
    """``statistics.quantiles(data, n=4)`` (its default, "exclusive") and ``statistics.median(data)`` of
    ``ordered``, already sorted, by the same arithmetic, without sorting it again. At least 2 values."""
    count = len(ordered)
    quartiles = []
    for i in (1, 2, 3):
        j = min(max(i * (count + 1) // 4, 1), count - 1)
        delta = i * (count + 1) - j * 4
        quartiles.append((ordered[j - 1] * (4 - delta) + ordered[j] * delta) / 4)
    half = count // 2
    median = ordered[half] if count % 2 else (ordered[half - 1] + ordered[half]) / 2
    return quartiles[0], median, quartiles[2]


def relative_median_error(values: list[float], presorted: bool = False) -> float:
    """Standard error of the median relative to it, from the interquartile range."""
    n = len(values)
    if n < 4:
        return math.inf
    q1, median, q3 = quartiles_of_sorted(values if presorted else sorted(values))
    if median <= 0:
        return math.inf
    sigma = (q3 - q1) / 1.349
    return 1.2533 * sigma / math.sqrt(n) / median


def ratio_noise(reference: list[float], candidate: list[float], presorted: bool = False) -> float:
    return math.hypot(relative_median_error(reference, presorted), relative_median_error(candidate, presorted))


def summarise(values: list[float]) -> TimingSummary:
    """One side's samples as every measurement reports them (also ``runner/process_modes.py``): the median, the
    quartiles, and the median's relative standard error."""
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) >= 2 else (values[0],) * 3
    return TimingSummary(
        median_ms=statistics.median(values),
        q1_ms=q1,
        q3_ms=q3,
        min_ms=min(values),
        mean_ms=statistics.fmean(values),
        samples=len(values),
        relative_noise=relative_median_error(values),
    )
