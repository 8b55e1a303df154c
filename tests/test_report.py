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
    set_up = render_report(frame, {"name": "r", "wall_s": 50.0, "setup_s": 7.25})
    assert "60.0% of the wall time; set-up before it 7.2 s" in set_up
    parts = {"interpreter": 0.25, "mlflow_import": 4.5, "mlflow_store": 2.5}  # the largest named, the rest pointed to
    with_parts = render_report(frame, {"name": "r", "wall_s": 50.0, "setup_s": 7.25, "setup_parts_s": parts})
    assert "set-up before it 7.2 s (the largest part: MLflow's import 4.5 s; all in `setup_parts_s`)" in with_parts
    assert "largest part" not in set_up  # a run from before the parts were kept
    suite_first = render_report(frame, {"name": "r", "wall_s": 50.0, "setup_s": 1.5, "setup_parts_s": {"suite": 1.0}})
    assert "(the largest part: the tasks resolved and planned 1.0 s;" in suite_first
    assert "set-up" not in one  # a run from before the set-up was kept


def test_the_report_says_where_the_wall_time_went():
    """The parts that ``runner.bench duty`` reads off a run's windows (kept in the manifest when the
    run ends) are in the report, named; without them (a run from before), no line."""
    frame = _frame([10.0])
    parts = {
        "measured": 10.0,
        "turn_not_measured": 2.0,
        "shared_phases_only": 5.0,
        "compile_beside_only": 0.0,
        "compile_warmup": 0.0,
        "no_device_work": 3.0,
    }
    text = render_report(frame, {"name": "r", "wall_s": 20.0, "wall_parts_s": parts})
    assert (
        "- where the wall time went: measured 10.0 s, inside the measurements' turns but not measured 2.0 s, "
        "shared device phases with no measurement beside them 5.0 s, no device work 3.0 s"
    ) in text  # no compile warm-up in this run: not named
    warmed = render_report(frame, {"name": "r", "wall_s": 24.0, "wall_parts_s": {**parts, "compile_warmup": 4.0}})
    assert "beside them 5.0 s, compile warm-up 4.0 s, no device work 3.0 s" in warmed
    beside = render_report(frame, {"name": "r", "wall_s": 24.0, "wall_parts_s": {**parts, "compile_beside_only": 4.0}})
    assert (
        "beside them 5.0 s, the compile warm-up's device work beside the sweep, alone on the GPU 4.0 s, "
        "no device work 3.0 s"
    ) in beside
    two = render_report(frame, {"name": "r", "wall_s": 10.0, "lanes": 2, "wall_parts_s": parts})
    assert "- where the 2 GPUs' wall time went: measured 10.0 s" in two
    assert "where the" not in render_report(frame, {"name": "r", "wall_s": 20.0})
    slots = {"prepare": 0.1, "health_gate": 2.0, "memory_admission": 30.0, "worker": 100.0, "first_try": 0.0}
    slots["read_gpu_after"] = 0.04
    text = render_report(frame, {"name": "r", "wall_s": 20.0, "wall_parts_s": parts, "slot_parts_s": slots})
    assert (
        "- where the evaluations' slots spent their time: in the worker 100.0 s, waiting for device memory 30.0 s, "
        "at the health gate 2.0 s, preparing jobs 0.1 s\n"
    ) in text  # the report's order; a part with no time, or under 0.05 s, is not named


def test_the_report_says_what_the_compile_warm_up_beside_the_sweep_cost():
    """A cold pass's warm-up beside the sweep (its manifest's ``warmup_beside``, e.g. torch_compile's whole suite on an
    H200: 222 candidates over 303.5 s, windows 106.3 s summed and 37.7 s as their union, 62.0 s of them timing 453
    kernels' configs, 9 evaluations held back 49.1 s) is a line of its own; a run without one (a warm cache, or the
    warm-up ahead) has none."""
    frame = _frame([10.0])
    beside = {
        "candidates": 222,
        "failed": 0,
        "span_s": 303.49,
        "evaluations_held_back": 9,
        "held_back_s": 49.133,
        "windows_s": 106.327,
        "kernels_autotuned": 453,
        "autotune_benchmark_s": 62.039,
    }
    text = render_report(frame, {"name": "r", "wall_s": 20.0, "warmup_beside": {**beside, "windows_union_s": 37.71}})
    assert (
        "- the compile warm-up beside the sweep: 222 candidates over 303.5 s; their device windows 106.3 s summed, "
        "37.7 s of the pass (several open at once), in which 62.0 s timed 453 kernels' autotuning configs; "
        "9 evaluations waited for theirs, 49.1 s together"
    ) in text
    older = render_report(frame, {"name": "r", "wall_s": 20.0, "warmup_beside": beside})  # no union kept then
    assert "their device windows 106.3 s summed, in which 62.0 s timed" in older
    failed = render_report(frame, {"name": "r", "wall_s": 20.0, "warmup_beside": {**beside, "failed": 2}})
    assert "over 303.5 s, 2 failed (their evaluations compiled for themselves); their device windows" in failed
    assert "warm-up beside" not in render_report(frame, {"name": "r", "wall_s": 20.0, "warmup_beside": None})
    assert "warm-up beside" not in render_report(frame, {"name": "r", "wall_s": 20.0})


def test_the_report_names_the_evaluations_that_placement_moves():
    """Where the placements' standard error exceeds the sampling noise the speedup depends on memory
    placement (a transpose on the H100: 4-5% between its four placements); those are listed, largest first."""
    frame = _frame([1.0, 1.0, 1.0])
    frame["ratio_noise"] = [0.001, 0.001, 0.002]
    frame["placement_noise"] = [0.009, 0.0005, None]
    text = render_report(frame, {"name": "r"})
    assert "## Where memory placement moves the speedup" in text and "1 evaluations:" in text
    assert "| reference | t0 | 1.0000 | 0.100% | 0.900% |" in text and "| t1 |" not in text
    frame["placement_noise"] = None  # one placement sampled (or a run from before): no section
    assert "placement" not in render_report(frame, {"name": "r"})


def test_the_report_names_the_evaluations_whose_audits_were_taken_twice():
    """A reference against itself on the H100 had its audits disturbed by other processes' CUDA contexts and
    was flagged for unjoined stream work; now fresh audits are judged, and the report lists every evaluation
    that needed them (a top-up of a shape's few audits, or a recheck) with its verdict, so a confirmed flag and a
    cleared one are both visible."""
    frame = _frame([1.0, 1.0, 1.0, 1.0])
    frame["audits_rechecked"] = [True, False, True, None]  # None: no timing (or a result from before)
    frame.loc[2, ["verdict", "reason"]] = ["integrity_violation", "unjoined_stream_work"]
    text = render_report(frame, {"name": "r"})
    assert "## Audits taken twice" in text and "2 evaluations:" in text
    section = text.split("## Audits taken twice")[1]
    assert "| reference | t0 | recheck | correct |  |" in section  # cleared by its recheck
    assert "| reference | t2 | recheck | integrity_violation | unjoined_stream_work |" in section  # confirmed
    assert "| t1 |" not in section and "| t3 |" not in section
    frame["audits_topped_up"] = [True, True, None, None]  # t0 topped up, then rechecked; t1 cleared by its top-up
    section = render_report(frame, {"name": "r"}).split("## Audits taken twice")[1]
    assert "3 evaluations:" in section and "(2);" in section and "(2)." in section
    assert "| reference | t1 | top-up | correct |  |" in section
    for before in (None, float("nan")):  # results from before the columns: None, or NaN from an older JSONL
        frame["audits_rechecked"] = frame["audits_topped_up"] = before
        assert "Audits taken twice" not in render_report(frame, {"name": "r"})


def test_the_report_counts_the_candidates_autotuned_kernels_and_how_they_got_their_configs():
    """``result.autotuning`` (runner/worker/autotuning.py) flattened per evaluation: Inductor's kernels read from the
    compile cache or autotuned during the evaluation, and the candidate's own ``@triton.autotune`` ones, summed per
    method; no section where none was recorded, nor for evaluations without kernels."""
    from runner.analysis.records import _autotuned

    kernel = {"kind": "inductor", "kernel": "k", "source": "s", "configs": 1, "ran": {}}
    first = _autotuned({"kernels": [dict(kernel, found_by="hit"), dict(kernel, found_by="hit")], "autotuned": 2})
    second = _autotuned(
        {"kernels": [dict(kernel, found_by="miss"), dict(kernel, found_by="only 1 config")], "autotuned": 1}
    )
    assert first == {"kernels_cached": 2, "kernels_autotuned_here": 0, "kernels_triton_autotune": 0}
    assert _autotuned({}) == dict.fromkeys(first)  # a result from before the record
    frame = _frame([1.0, 1.0, 1.0, 1.0])
    assert "## Autotuned kernels" not in render_report(frame, {"name": "r", "wall_s": 10.0})
    frame.loc[0, list(first)] = list(first.values())
    frame.loc[1, list(second)] = list(second.values())
    frame.loc[2, ["method", "kernels_triton_autotune", "kernels_cached", "kernels_autotuned_here"]] = ["mine", 1, 0, 0]
    frame.loc[3, list(first)] = [0, 0, 0]  # the reference method: no kernels
    text = render_report(frame, {"name": "r", "wall_s": 10.0})
    section = text.split("## Autotuned kernels", 1)[1]
    assert "| mine | 1 | 0 | 0 | 1 |" in section
    assert "| reference | 2 | 2 | 1 | 0 |" in section


def test_the_report_says_when_the_first_measurement_came():
    """The sweep's start (``runner.analysis.duty.sweep_start``, kept in the manifest when the run ends): the first
    measurement from the process's start, with the steps it waited on; from the sweep's start for a run given its arguments in an
    older process; no line where none was kept or nothing was measured."""
    frame = _frame([10.0])
    start = {"from": "process start", "fork_server_ready": 5.5, "sweep_started": 4.47, "first_job_given": 7.4}
    text = render_report(frame, {"name": "r", "wall_s": 20.0, "sweep_start_s": {**start, "first_measurement": 8.14}})
    assert (
        "- the sweep's start: the first measurement 8.1 s after the process started (the fork server ready at 5.5 s, "
        "the set-up done at 4.5 s, the first job given to a worker at 7.4 s); every step in `sweep_start_s`" in text
    )
    older = {"from": "sweep start", "sweep_started": 0.0, "fork_server_ready": None, "first_measurement": 1.25}
    assert "the first measurement 1.2 s after the sweep started (the set-up done at 0.0 s)" in render_report(
        frame, {"name": "r", "wall_s": 20.0, "sweep_start_s": older}
    )
    assert "sweep's start" not in render_report(frame, {"name": "r", "wall_s": 20.0})
    unmeasured = {**start, "first_measurement": None}
    assert "sweep's start" not in render_report(frame, {"name": "r", "wall_s": 20.0, "sweep_start_s": unmeasured})
