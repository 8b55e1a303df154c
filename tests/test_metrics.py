"""fast_p and the geometric mean, on hand-made records with known answers."""

from __future__ import annotations

import math

import pandas as pd

from runner.analysis.metrics import fast_p, geomean_speedup, per_category, summary


def _frame(rows):
    frame = pd.DataFrame(rows, columns=["category", "verdict", "speedup"])
    frame["reason"] = ""
    frame["candidate_sol_pct"] = None
    return frame


FRAME = _frame(
    [
        ("a", "correct", 2.0),
        ("a", "correct", 0.5),
        ("b", "incorrect", None),
        ("b", "correct", 1.0),
        ("b", "timeout", None),
    ]
)


def test_fast_p_counts_correct_and_faster_over_all_evaluations():
    assert fast_p(FRAME, 0.0) == 3 / 5
    assert fast_p(FRAME, 1.0) == 1 / 5  # 1.0 is not faster than 1.0
    assert fast_p(FRAME, 0.5) == 2 / 5
    assert fast_p(FRAME, 2.0) == 0.0


def test_geomean_over_correct_only():
    assert math.isclose(geomean_speedup(FRAME), 1.0)
    assert math.isnan(geomean_speedup(_frame([("a", "incorrect", 3.0)])))


def test_summary_and_categories():
    s = summary(FRAME)
    assert s["evaluations"] == 5 and s["correct"] == 3 and math.isclose(s["fast_1"], 0.2)
    table = per_category(FRAME).set_index("category")
    assert table.loc["a", "tasks"] == 2 and table.loc["a", "correct %"] == 100.0
    assert math.isclose(table.loc["b", "correct %"], 100 / 3)
    assert table.loc["a", "fast_1 %"] == 50.0


def test_categories_show_integrity_violations_with_reasons_and_roofline():
    frame = _frame(
        [
            ("a", "correct", 2.0),
            ("a", "integrity_violation", None),
            ("a", "integrity_violation", None),
            ("b", "correct", 1.0),
        ]
    )
    frame["reason"] = ["", "timed_output_mismatch", "faster_than_physics", ""]
    frame["candidate_sol_pct"] = [40.0, None, 900.0, None]
    table = per_category(frame).set_index("category")
    assert table.loc["a", "integrity violations"] == "2 (faster_than_physics x1, timed_output_mismatch x1)"
    assert table.loc["b", "integrity violations"] == "0"
    assert table.loc["a", "median % of roofline"] == 40.0  # correct evaluations only
    assert pd.isna(table.loc["b", "median % of roofline"])
