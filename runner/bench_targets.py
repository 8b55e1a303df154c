"""The targets of issue 4's benchmarks, and each figure of ``make bench`` judged against them (``bench_protocol``).

Only figures in, rows out: which figure, its value and unit, its target, and whether it is met (None where the figure
is missing: a group without tasks, a step not run). Also which tasks of a pair moved over their targets, those whose
floors between processes the protocol measures.
"""

from __future__ import annotations

import sys

# The targets for two back-to-back passes, per group of tasks: |Δ speedup| quantiles, in percent.
REPEAT_TARGETS = {
    "ops and fusions (levels 1-2)": {"median_pct": 0.05, "p95_pct": 0.5, "max_pct": 1.0},
    "blocks (level 3)": {"p95_pct": 2.0},
}
# Measured GPU time over the whole suite's wall time, set-up included.
DUTY_TARGET_PCT = 90.0
# Nsight Compute against kbench's median: this many tasks within this much.
ACCURACY_TARGET_PCT = 5.0
ACCURACY_MIN_TASKS = 10
# The floors are measured for at most this many of the tasks over their targets (those that moved most).
FLOOR_TASKS = 8


def over_targets(figures: dict) -> list[str]:
    """The tasks of a ``repeat`` whose move is over their group's p95 target, those that moved most first."""
    over = []
    for row in figures["largest"]:
        group = row["group"].split(", ", 1)[1]
        if row["abs_delta_pct"] > REPEAT_TARGETS[group]["p95_pct"]:
            over.append(row["task"])
    return over[:FLOOR_TASKS]


def _row(figure: str, value, unit: str, target: str, met: bool | None) -> dict:
    return {"figure": figure, "value": value, "unit": unit, "target": target, "met": met}


def judge(figures: dict) -> list[dict]:
    """Each figure of the protocol against its target: ``met`` true or false, or None where the figure is missing
    (a group without tasks, a step not run)."""
    rows = []
    for method, part in figures.get("methods", {}).items():
        found = part.get("repeat", {})
        judged = [("", found.get("abs_delta_speedup", {}))]
        if "beyond_process_floor" in found:
            judged.append((" beyond the floors between processes", found["beyond_process_floor"]["abs_delta_speedup"]))
        for label, quantiles in judged:
            for group, targets in REPEAT_TARGETS.items():
                got = quantiles.get(f"{method}, {group}")
                for quantile, limit in targets.items():
                    value = got[quantile] if got else None
                    rows.append(
                        _row(
                            f"{method}, {group}: |Δ speedup| {quantile.removesuffix('_pct')}{label}",
                            value,
                            "%",
                            f"≤ {limit}%",
                            None if value is None else value <= limit,
                        )
                    )
        for side, passes in sorted(part.get("duty", {}).items()):
            value = passes["duty_with_setup_pct"]
            compiling = passes.get("compile_beside_only_s") or 0.0
            alone = f"; the compile's device work alone {compiling:.1f} s of it" if compiling >= 0.05 else ""
            rows.append(
                _row(
                    f"{method}, pass {side}: duty with set-up ({passes['evaluations']} evaluations{alone})",
                    value,
                    "%",
                    f"≥ {DUTY_TARGET_PCT}%",
                    None if value is None else value >= DUTY_TARGET_PCT,
                )
            )
    if "lock" in figures:
        lock = figures["lock"]
        rows.append(
            _row(
                f"lock pair: overlapping measurement windows ({lock['windows'][0]} and {lock['windows'][1]})",
                lock["overlapping_pairs"],
                "",
                "0, both runs measured",
                lock["overlapping_pairs"] == 0 and min(lock["windows"]) > 0,
            )
        )
    if "accuracy" in figures:
        within = [row for row in figures["accuracy"]["tasks"] if abs(row["diff_pct"]) <= ACCURACY_TARGET_PCT]
        rows.append(
            _row(
                f"Nsight Compute: tasks within {ACCURACY_TARGET_PCT}% of gpu__time_duration.sum",
                len(within),
                "",
                f"≥ {ACCURACY_MIN_TASKS}",
                len(within) >= ACCURACY_MIN_TASKS,
            )
        )
    return rows


def print_targets(rows: list[dict]) -> None:
    """The judged figures as a table, to stderr (stdout carries the JSON)."""
    marks = {True: "met", False: "MISSED", None: "-"}
    for row in rows:
        value = row["value"]
        shown = "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value)) + row["unit"]
        print(f"{marks[row['met']]:>6}  {row['figure']}: {shown} (target {row['target']})", file=sys.stderr)
