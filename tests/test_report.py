"""The run report's headline: the measured share of the wall time, per GPU lane."""

from __future__ import annotations

import pandas as pd

from runner.analysis.records import COLUMNS
from runner.analysis.report import render_report


def _frame(measured: list[float]) -> pd.DataFrame:
    rows = []
    for index, seconds in enumerate(measured):
        row = dict.fromkeys(COLUMNS)
        row.update(
            eval_id=f"e{index}",
            task_id=f"t{index}",
            category="elementwise",
            level=1,
            method="reference",
            verdict="correct",
            reason="",
            speedup=1.0,
            measured_s=seconds,
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def test_measured_share_is_of_every_lanes_wall_time():
    """Two GPUs measure at once, so their measured time is a share of twice the wall time (a
    two-GPU run on H200s printed 58.4% of the wall time where each GPU measured 29%)."""
    frame = _frame([10.0, 20.0])
    one = render_report(frame, {"name": "r", "wall_s": 50.0})
    assert "30.0 s = 60.0% of the wall time" in one
    two = render_report(frame, {"name": "r", "wall_s": 50.0, "lanes": 2})
    assert "30.0 s = 30.0% of the 2 GPUs' wall time together" in two
