"""Benchmark metrics over flat evaluation records.

fast_p (KernelBench's definition): the fraction of evaluations that are correct AND faster
than ``p`` times the reference. The geometric-mean speedup is taken over correct ones only.
"""

from __future__ import annotations

import math

import pandas as pd

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)


def fast_p(frame: pd.DataFrame, p: float) -> float:
    if frame.empty:
        return math.nan
    correct = frame["verdict"] == "correct"
    fast = frame["speedup"].fillna(0.0) > p
    return float((correct & fast).mean())


def geomean_speedup(frame: pd.DataFrame) -> float:
    speedups = frame.loc[frame["verdict"] == "correct", "speedup"].dropna()
    speedups = speedups[speedups > 0]
    if speedups.empty:
        return math.nan
    return float(math.exp(sum(math.log(s) for s in speedups) / len(speedups)))


def summary(frame: pd.DataFrame) -> dict:
    """The headline numbers of one method's evaluations."""
    out = {"evaluations": len(frame), "correct": int((frame["verdict"] == "correct").sum())}
    for p in FAST_P:
        out[f"fast_{p:g}"] = fast_p(frame, p)
    out["geomean_speedup"] = geomean_speedup(frame)
    timed = frame.loc[frame["verdict"] == "correct", "speedup"].dropna()
    out["median_speedup"] = float(timed.median()) if not timed.empty else math.nan
    return out


def per_category(frame: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for category, group in frame.groupby("category", sort=True):
        rows.append(
            {
                "category": category,
                "tasks": len(group),
                "correct %": 100.0 * float((group["verdict"] == "correct").mean()),
                "fast_1 %": 100.0 * fast_p(group, 1.0),
                "geomean": geomean_speedup(group),
                "integrity violations": _violations(group),
                "median % of roofline": _median_or_none(group.loc[group["verdict"] == "correct", "candidate_sol_pct"]),
            }
        )
    columns = ["category", "tasks", "correct %", "fast_1 %", "geomean", "integrity violations", "median % of roofline"]
    return pd.DataFrame(rows, columns=columns)


def _violations(group: pd.DataFrame) -> str:
    """``0``, or the count with its reasons, e.g. ``2 (timed_output_mismatch, static_torch_compute)``."""
    hits = group[group["verdict"] == "integrity_violation"]
    if hits.empty:
        return "0"
    reasons = ", ".join(f"{reason} x{count}" for reason, count in hits["reason"].value_counts().sort_index().items())
    return f"{len(hits)} ({reasons})"


def _median_or_none(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.median()) if not values.empty else None


def verdict_counts(frame: pd.DataFrame) -> dict[str, int]:
    return {str(k): int(v) for k, v in frame["verdict"].value_counts().sort_index().items()}
