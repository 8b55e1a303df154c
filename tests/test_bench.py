"""``runner.bench``: repeatability, duty cycle, window overlap and the Nsight Compute comparison,
computed from real (CPU) runs; ``processes``, in real fresh processes on the CPU. ncu itself cannot
run here: its CSV is a fixture in ncu's format (the columns and units it printed on the H100)."""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from runner.analysis.disturbances import (
    EXIT_WINDOW_S,
    HOST_WAIT_MIN_MS,
    IDLE_GAP_S,
    WHEN_BIN_S,
    WHEN_BINS,
    disturbances,
)
from runner.analysis.duty import duty
from runner.analysis.host_pace import MIN_SAMPLES, host_pace
from runner.analysis.ncu import ncu
from runner.analysis.records import job_results
from runner.analysis.repeatability import overlap, repeat
from runner.analysis.slot_states import NOT_IN_A_SLOT, SLOT_STATES
from runner.executors.base import SPARES_LOG
from runner.methods import METHODS
from runner.paths import TASKS_DIR
from runner.tasks.loader import load_native_tasks
from runner.warmup_beside import WARMUP_LOG
from tests.conftest import FAST_TIMING, kbench

TASKS = "[gelu_tanh,leaky_relu_fp32]"
REPO = Path(__file__).resolve().parent.parent


def _reference_run(cwd: Path, name: str, *overrides: str) -> Path:
    """A real CPU run of the reference method over ``TASKS``, short timing; its run directory."""
    proc = kbench(
        "run",
        "suite=full",
        f"suite.tasks={TASKS}",
        "method=reference",
        "tracking=off",
        f"run.name={name}",
        "executor.prestart=0",
        *FAST_TIMING,
        *overrides,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = (cwd / "runs").glob(f"*-{name}-*")
    return run_dir


@pytest.fixture(scope="module")
def two_passes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    return [_reference_run(tmp, name) for name in ("pass-a", "pass-b")]


def _copy_of(run_dir: Path, tmp_path: Path) -> tuple[Path, list[Path]]:
    """A copy of a finished run to edit, and its results' files in a fixed order."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    return run, sorted(run.glob("jobs/*/out/result.json"))


def test_repeat_pairs_tasks_and_reports_duty(two_passes):
    figures = repeat(*two_passes)
    assert figures["pairs"] == 2
    ops = figures["abs_delta_speedup"]["reference, ops and fusions (levels 1-2)"]
    assert ops["n"] == 2 and 0 <= ops["median_pct"] <= ops["max_pct"] < 50
    largest = figures["largest"]
    assert {row["task"] for row in largest} == {"gelu_tanh", "leaky_relu_fp32"}
    assert largest[0]["abs_delta_pct"] == pytest.approx(ops["max_pct"])
    assert largest[0]["abs_delta_pct"] >= largest[1]["abs_delta_pct"]
    first, second = largest[0]["speedups"]
    assert largest[0]["abs_delta_pct"] == pytest.approx(100 * abs(first / second - 1))
    timings = [
        {r["task_id"]: r["timing"] for r in map(json.loads, map(Path.read_text, run.glob("jobs/*/out/result.json")))}
        for run in two_passes
    ]
    for row in largest:  # the move against both runs' own noise estimates: sampling and placements together
        noise_a, noise_b = row["noise_pct"]
        for noise, timing in zip(row["noise_pct"], (t[row["task"]] for t in timings)):
            # Four placements, and as many again where theirs disagreed (CI's 2 loaded cores: 16 once).
            assert timing["placements"] == 4 + timing["placements_added"] and timing["placement_noise"] is not None
            assert noise == pytest.approx(100 * math.hypot(timing["ratio_noise"], timing["placement_noise"]))
        assert noise_a > 0 and noise_b > 0
        assert row["placement_spread_pct"] == [100 * t[row["task"]]["placement_spread"] for t in timings]
        assert row["z"] == pytest.approx(row["abs_delta_pct"] / math.hypot(noise_a, noise_b))
        # The speedup's move is the two sides' moves together: first / second = (1 + candidate) / (1 + reference).
        sides = (1 + row["candidate_moved_pct"] / 100) / (1 + row["reference_moved_pct"] / 100)
        assert row["speedups"][0] / row["speedups"][1] == pytest.approx(sides, rel=1e-9)
        # No clock on a CPU: nothing to compare clock by clock (runner/analysis/clock_mix.py; tests/test_clock_mix.py).
        assert row["sm_clock_mhz"] == [None, None] and row["at_matched_clocks"] is None
        assert row["preload_not_done"] == []  # no capture on a CPU: none failed
        assert row["led_pct"] == [None, None]  # the host clock leads nothing
        assert row["waits_for_device"] == []  # no wait probe on the host clock
    assert figures["preload_not_done"] == {"pairs": 0, "in_largest": 0}
    assert figures["waits_for_device"] == {"pairs": 0, "in_largest": 0}
    beyond = figures["beyond_noise"]
    assert beyond["z_over_2"] == sum(row["z"] > 2 for row in largest)
    assert beyond["z_over_2_pct"] == pytest.approx(50 * beyond["z_over_2"])
    assert beyond["z_median"] == pytest.approx(sum(row["z"] for row in largest) / 2)
    for run in figures["duty"]:
        assert run["evaluations"] == 2 and 0 < run["duty_pct"] < 100 and run["evaluations_per_min"] > 0
        # The command's set-up before the sweep is kept apart and counted in the stricter duty.
        assert run["setup_s"] > 0
        expected = 100 * run["measured_s"] / (run["wall_s"] + run["setup_s"])
        assert run["duty_with_setup_pct"] == pytest.approx(expected) and run["duty_with_setup_pct"] < run["duty_pct"]
        assert run["while_warming_up"] is None  # no compile warm-up beside these sweeps
    assert duty(two_passes[0]) == figures["duty"][0]


def test_repeat_names_the_pairs_whose_preload_capture_failed(two_passes, tmp_path: Path):
    """A task whose reference capture failed at one shape in the second run is named so in its row, and counted
    among all pairs and the largest; a preload not tried (no CUDA device) is no failure."""
    run, paths = _copy_of(two_passes[1], tmp_path)
    results = {json.loads(path.read_text())["task_id"]: path for path in paths}
    failed = json.loads(results["gelu_tanh"].read_text())
    failed["environment"]["preloaded_kernels"] = {
        "shapes": {"small": "loaded", "perf": "not done: AcceleratorError: CUDA error: operation not permitted when"},
        "seconds": 0.3,
    }
    failed["environment"]["preloaded_candidate"] = {"shapes": {"small": "loaded", "perf": "loaded"}}
    results["gelu_tanh"].write_text(json.dumps(failed))
    untried = json.loads(results["leaky_relu_fp32"].read_text())
    untried["environment"]["preloaded_kernels"] = {"not done": "no CUDA device"}
    results["leaky_relu_fp32"].write_text(json.dumps(untried))
    figures = repeat(two_passes[0], run)
    rows = {row["task"]: row for row in figures["largest"]}
    assert rows["gelu_tanh"]["preload_not_done"] == ["reference"]
    assert rows["leaky_relu_fp32"]["preload_not_done"] == []
    assert figures["preload_not_done"] == {"pairs": 1, "in_largest": 1}


def test_repeat_gives_each_runs_share_of_led_samples_per_side(two_passes, tmp_path: Path):
    """Where a run's measurement led samples (``timing.led_samples``, a GPU's queue short before them), its row gives
    each side's share of its samples that were, in percent; a run that did not lead gives None."""
    run, paths = _copy_of(two_passes[1], tmp_path)
    results = {json.loads(path.read_text())["task_id"]: path for path in paths}
    led = json.loads(results["gelu_tanh"].read_text())
    samples = led["timing"]["candidate"]["samples"], led["timing"]["reference"]["samples"]
    led["timing"]["led_samples"] = {"candidate": samples[0] // 2, "reference": 0}
    results["gelu_tanh"].write_text(json.dumps(led))
    rows = {row["task"]: row for row in repeat(two_passes[0], run)["largest"]}
    first, second = rows["gelu_tanh"]["led_pct"]
    assert first is None
    assert second == {"candidate": pytest.approx(100 * (samples[0] // 2) / samples[0]), "reference": 0.0}
    assert rows["leaky_relu_fp32"]["led_pct"] == [None, None]


def test_repeat_names_the_sides_found_waiting_for_the_device(two_passes, tmp_path: Path):
    """A side whose wait probe found its calls waiting for the device in either run (``timing.waits_for_device``) is
    named in its row and the pair counted among all and the largest; a side probed and found not waiting is not."""
    run, paths = _copy_of(two_passes[1], tmp_path)
    results = {json.loads(path.read_text())["task_id"]: path for path in paths}
    for task, found in (
        ("gelu_tanh", {"reference": True, "candidate": False}),
        ("leaky_relu_fp32", {"reference": False}),
    ):
        result = json.loads(results[task].read_text())
        result["timing"]["waits_for_device"] = found
        results[task].write_text(json.dumps(result))
    figures = repeat(two_passes[0], run)
    rows = {row["task"]: row for row in figures["largest"]}
    assert rows["gelu_tanh"]["waits_for_device"] == ["reference"]
    assert rows["leaky_relu_fp32"]["waits_for_device"] == []
    assert figures["waits_for_device"] == {"pairs": 1, "in_largest": 1}


def _without(run_dir: Path, task_id: str, copy: Path) -> Path:
    """A copy of a finished run whose evaluations of ``task_id`` are gone: one part of a split suite."""
    shutil.copytree(run_dir, copy)
    for job in copy.glob("jobs/*"):
        if json.loads((job / "job.json").read_text())["task"]["task_id"] == task_id:
            shutil.rmtree(job)
    return copy


def test_repeat_joins_the_pairs_of_a_split_suite(two_passes, tmp_path: Path):
    """Two pairs of runs over disjoint parts of the suite (``suite.shard``) give the figures of one pair
    over both; a task in two pairs, or an odd number of runs, is one line and exit 2."""
    first, second = two_passes
    parts = [
        _without(run, gone, tmp_path / f"{run.name}-{gone}")
        for gone in ("leaky_relu_fp32", "gelu_tanh")
        for run in (first, second)
    ]
    joined, whole = repeat(*parts), repeat(first, second)
    assert joined["pairs"] == whole["pairs"] == 2
    assert joined["runs"] == [part.name for part in parts]
    assert joined["abs_delta_speedup"] == whole["abs_delta_speedup"]
    assert joined["largest"] == whole["largest"] and joined["beyond_noise"] == whole["beyond_noise"]
    assert [d["evaluations"] for d in joined["duty"]] == [1, 1, 1, 1]
    proc = _bench("repeat", str(first), str(second), str(second), str(first))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is in more than one pair of runs" in proc.stderr
    proc = _bench("repeat", str(first), str(second), str(first))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "got 3 runs" in proc.stderr
    proc = _bench("repeat", str(first))
    assert proc.returncode == 2 and proc.stderr == "kbench bench repeat: takes RUN_A RUN_B [MORE_PAIRS...]; got 1\n"


def test_repeat_takes_each_tasks_floor_from_fresh_processes(two_passes, tmp_path: Path):
    """``--floor`` (``processes``' output, measured here on the CPU) gives each covered row the spread of its
    speedup between processes, and each group's moves less those floors."""
    proc = _bench("processes", "--device", "cpu", "--processes", "2", "--samples", "8", "gelu_tanh", "leaky_relu_fp32")
    assert proc.returncode == 0, proc.stderr[-2000:]
    measured = json.loads(proc.stdout)
    floor = tmp_path / "floor.json"
    floor.write_text(proc.stdout)
    figures = repeat(*two_passes, floors=(floor,))
    rows = {row["task"]: row for row in figures["largest"]}
    for task, row in rows.items():
        assert row["process_floor_pct"] == measured["tasks"][task]["speedup_spread_pct"]
    beyond = figures["beyond_process_floor"]
    assert beyond["floors"] == [str(floor)] and beyond["tasks_with_a_floor"] == 2
    excess = [max(0.0, row["abs_delta_pct"] - row["process_floor_pct"]) for row in rows.values()]
    group = beyond["abs_delta_speedup"]["reference, ops and fusions (levels 1-2)"]
    assert group["max_pct"] == pytest.approx(max(excess)) and group["n"] == 2
    # A floor over the move leaves nothing beyond it; a task without one keeps its whole move.
    measured["tasks"]["gelu_tanh"]["speedup_spread_pct"] = 1000.0
    del measured["tasks"]["leaky_relu_fp32"]
    floor.write_text(json.dumps(measured))
    figures = repeat(*two_passes, floors=(floor,))
    group = figures["beyond_process_floor"]["abs_delta_speedup"]["reference, ops and fusions (levels 1-2)"]
    assert group["max_pct"] == pytest.approx(rows["leaky_relu_fp32"]["abs_delta_pct"])
    assert figures["beyond_process_floor"]["tasks_with_a_floor"] == 1
    assert {row["task"]: row["process_floor_pct"] for row in figures["largest"]}["leaky_relu_fp32"] is None
    assert "process_floor_pct" not in repeat(*two_passes)["largest"][0]
    # Through the command line: the figures, then each bad input as one line and exit 2.
    proc = _bench("repeat", str(two_passes[0]), "--floor", str(floor), str(two_passes[1]))
    assert proc.returncode == 0 and json.loads(proc.stdout)["beyond_process_floor"]["tasks_with_a_floor"] == 1
    not_a_floor = tmp_path / "other.json"
    not_a_floor.write_text('{"tasks": []}')
    for args, says in [
        (["--floor", str(floor), "--floor", str(floor)], "gelu_tanh (reference) has a floor in more than one file"),
        (["--floor", str(not_a_floor)], "is not the output of `python -m runner.bench processes`"),
        (["--floor"], "--floor takes a file of `processes`, and only for repeat"),
        (["--floor", str(tmp_path / "gone.json")], "no such file or run directory"),
    ]:
        proc = _bench("repeat", *map(str, two_passes), *args)
        assert proc.returncode == 2 and proc.stdout == "", args
        assert proc.stderr.count("\n") == 1 and says in proc.stderr, proc.stderr
    proc = _bench("duty", str(two_passes[0]), "--floor", str(floor))
    assert proc.returncode == 2 and "only for repeat" in proc.stderr


def test_a_shard_runs_its_part_of_the_suite(tmp_path: Path):
    run_dir = _reference_run(tmp_path, "second-half", "suite.shard=2/2")
    assert [result.task_id for _, result in job_results(run_dir)] == ["leaky_relu_fp32"]


def test_the_wall_parts_add_up_to_the_wall_time(two_passes, tmp_path: Path):
    """``wall_parts_s`` splits the wall time into parts that add up to it, none negative, read off a
    real run's windows; on two lanes the parts add up to both lanes' wall time."""
    figures = duty(two_passes[0])
    parts = figures["wall_parts_s"]
    assert all(value >= 0 for value in parts.values()), parts
    assert sum(parts.values()) == pytest.approx(figures["wall_s"])
    assert parts["measured"] == figures["measured_s"] > 0
    assert parts["turn_not_measured"] == pytest.approx(figures["exclusive_s"] - figures["measured_s"])
    assert parts["shared_phases_only"] > 0  # the reference outputs and correctness calls hold the token shared
    run, (_, second) = _copy_of(two_passes[0], tmp_path)
    data = json.loads(second.read_text())
    data["environment"]["device_token"]["path"] = "another GPU's token"
    second.write_text(json.dumps(data))
    two_lanes = duty(run)
    assert two_lanes["lanes"] == 2
    assert sum(two_lanes["wall_parts_s"].values()) == pytest.approx(2 * two_lanes["wall_s"])
    assert all(value >= 0 for value in two_lanes["wall_parts_s"].values())


def test_the_turn_parts_add_up_to_the_turns(two_passes, tmp_path: Path):
    """``turn_parts_s`` splits the measurements' exclusive windows into the kept samples (the measured time), the
    audit calls, the moments before the first batch and after the last, and the batches' rest, read off a real
    run's samples files; a result whose samples file is gone adds nothing, and with none the parts are None."""
    figures = duty(two_passes[0])
    parts = figures["turn_parts_s"]
    assert sum(parts.values()) == pytest.approx(figures["exclusive_s"])
    assert parts["samples"] == pytest.approx(figures["measured_s"])
    assert parts["before_first_batch"] >= 0 and parts["after_last_batch"] >= 0 and parts["batches_rest"] >= 0, parts
    # A GPU's samples file (protocol 3): audit calls of 2 and 3 ms, the first one's call kept as a 1.5 ms sample.
    # The kept call is a sample; the rest of the audits stays theirs; the parts still add up to the turns.
    run, results = _copy_of(two_passes[0], tmp_path / "audited")
    path = results[0].parent / "samples.json"
    raw = json.loads(path.read_text())
    raw["sync_audit"] = {"reference": [2.0], "candidate": [3.0]}
    raw["audit_samples"] = {"reference": [1.5], "candidate": []}
    path.write_text(json.dumps(raw))
    audited = duty(run)["turn_parts_s"]
    assert audited["samples"] == pytest.approx(parts["samples"] + 0.0015)
    assert audited["audits"] == pytest.approx(parts["audits"] + 0.0035)
    assert audited["batches_rest"] == pytest.approx(parts["batches_rest"] - 0.005)
    assert sum(audited.values()) == pytest.approx(sum(parts.values()))
    run, results = _copy_of(two_passes[0], tmp_path)
    (results[0].parent / "samples.json").unlink()
    fewer = duty(run)
    assert 0 < fewer["turn_parts_s"]["samples"] < parts["samples"]
    for result in results[1:]:
        (result.parent / "samples.json").unlink()
    assert duty(run)["turn_parts_s"] is None


def test_a_runs_batches_say_which_cpu_measured_them(two_passes):
    """Each kept batch of a real (CPU) run has the host CPU its measuring thread was on, one the worker could use,
    and the time that thread waited for a core while the batch was in flight (``runner/worker/host_cpu.py``)."""
    results = list(two_passes[0].glob("jobs/*/out/result.json"))
    assert results
    for path in results:
        allowed = json.loads(path.read_text())["environment"]["host_cpus"]
        raw = json.loads(path.with_name("samples.json").read_text())
        assert len(raw["batch_host_cpu"]) == len(raw["batch_window"]) > 0
        assert set(raw["batch_host_cpu"]) <= set(allowed), (raw["batch_host_cpu"], allowed)
        # And how long it waited for a core while each was in flight: never more than the batch's own window.
        waits = raw["batch_host_wait_ms"]
        assert len(waits) == len(raw["batch_window"])
        for wait, (launched, closed) in zip(waits, raw["batch_window"]):
            assert 0 <= wait <= 1000 * (closed - launched) + 1.0, (wait, launched, closed)


def test_the_batches_rest_splits_into_between_the_samples_and_around_the_batches(two_passes, tmp_path: Path):
    """Each kept batch's span (first sample's start to last one's end) splits the batches' rest into the time
    between their samples and the time around them, which add up to it, read off a real run's samples files; a run
    whose samples files have no spans (before the twenty-eighth session) has no split."""
    figures = duty(two_passes[0])
    split = figures["batches_rest_parts_s"]
    assert sum(split.values()) == pytest.approx(figures["turn_parts_s"]["batches_rest"])
    assert split["between_samples"] >= 0 and split["around_batches"] > 0, split  # launching, closing, judging
    for samples_file in two_passes[0].glob("jobs/*/out/samples.json"):
        raw = json.loads(samples_file.read_text())
        assert len(raw["batch_span_ms"]) == len(raw["batch_window"])
        for span, (launched, closed), placement_times in zip(
            raw["batch_span_ms"], raw["batch_window"], _per_batch(raw)
        ):
            assert sum(placement_times) <= span <= 1000 * (closed - launched)
    run, results = _copy_of(two_passes[0], tmp_path)
    _drop_from_samples_files(results, "batch_span_ms")
    assert duty(run)["batches_rest_parts_s"] is None


def _drop_from_samples_files(results, key: str) -> None:
    """``key`` taken out of each copied result's ``samples.json``, as a run made before it was recorded has them."""
    for result in results:
        path = result.parent / "samples.json"
        raw = json.loads(path.read_text())
        del raw[key]
        path.write_text(json.dumps(raw))


def test_the_gpus_sleep_ahead_of_led_samples_is_summed_from_the_samples_files(two_passes, tmp_path: Path):
    """``leads_s``: each kept batch's leads (``batch_lead_ms``) summed over the run's turns; a real CPU run has each
    batch's, all zero (the host clock leads nothing); planted leads are summed; a run whose samples files have none
    (before the fifty-eighth session) has no figure."""
    assert duty(two_passes[0])["leads_s"] == 0.0
    run, results = _copy_of(two_passes[0], tmp_path)
    planted = 0.0
    for result in results:
        path = result.parent / "samples.json"
        raw = json.loads(path.read_text())
        assert len(raw["batch_lead_ms"]) == len(raw["batch_window"]) == len(raw["batch_led"])
        raw["batch_lead_ms"] = [1.5] * len(raw["batch_window"])
        planted += 1.5 * len(raw["batch_window"])
        path.write_text(json.dumps(raw))
    assert duty(run)["leads_s"] == pytest.approx(planted / 1000.0)
    _drop_from_samples_files(results, "batch_lead_ms")
    assert duty(run)["leads_s"] is None


def test_the_gpus_gaps_between_batches_are_summed_from_the_samples_files(two_passes, tmp_path: Path):
    """``gpu_between_batches``: each turn's gaps before its batches after the first (``batch_gap_before_ms``) counted,
    summed and their median; a real CPU run records none (the host clock has no GPU between batches), so no figure;
    planted gaps are read, each turn's first left out."""
    assert duty(two_passes[0])["gpu_between_batches"] is None
    run, results = _copy_of(two_passes[0], tmp_path)
    planted, count, every = 0.0, 0, []
    for result in results:
        path = result.parent / "samples.json"
        raw = json.loads(path.read_text())
        batches = len(raw["batch_window"])
        assert raw["batch_gap_before_ms"] == [None] * batches
        # The turn's first (reaching back before the turn), then 0.04 ms and 2.0 ms in turn, one gap unread (None:
        # after a batch thrown away).
        gaps = [250.0] + [0.04 if k % 2 else 2.0 for k in range(1, batches)]
        if batches > 2:
            gaps[2] = None
        raw["batch_gap_before_ms"] = gaps
        read = [gap for gap in gaps[1:] if gap is not None]
        planted += sum(read)
        count += len(read)
        every.extend(read)
        path.write_text(json.dumps(raw))
    figure = duty(run)["gpu_between_batches"]
    assert count > 0 and figure["batches"] == count
    assert figure["sum_s"] == pytest.approx(planted / 1000.0)
    assert figure["median_ms"] == pytest.approx(statistics.median(every))


def test_the_wait_probes_seconds_are_summed_before_and_in_the_turns(two_passes, tmp_path: Path):
    """``wait_probes_s``: a real CPU run's sampler (the host clock) leads nothing and probes nothing, so no figure;
    planted records (one evaluation probed before its turn, 0.25 s, and in it, 0.1 s; another not at all) are summed
    and the evaluations that probed counted; the sides probed, where the results say what each probe went on (from the
    sixty-seventh session): one settled by a call of its own, one after two tries."""
    assert duty(two_passes[0])["wait_probes_s"] is None
    run, results = _copy_of(two_passes[0], tmp_path)
    assert len(results) >= 2
    planted = ({"before_turn": 0.25, "in_turn": 0.1}, {"before_turn": 0.0, "in_turn": 0.0})
    for path, record in zip(results, planted):
        result = json.loads(path.read_text())
        result["timing"]["wait_probes_s"] = record
        path.write_text(json.dumps(result))
    figure = duty(run)["wait_probes_s"]
    seconds = {"before_turn": pytest.approx(0.25), "in_turn": pytest.approx(0.1), "evaluations": 1}
    assert figure == {**seconds, "sides": None, "settled_by_one_call": None, "tries": None}
    result = json.loads(results[0].read_text())
    result["timing"]["wait_probe_calls"] = {
        "reference": {"host_ms": 0.6, "gpu_ms": 9.6, "tries": 0},
        "candidate": {"host_ms": 9.6, "gpu_ms": 9.6, "tries": 2},
    }
    results[0].write_text(json.dumps(result))
    assert duty(run)["wait_probes_s"] == {**seconds, "sides": 2, "settled_by_one_call": 1, "tries": 2}


def test_the_audits_taken_again_are_counted_with_their_seconds(two_passes, tmp_path: Path):
    """``audits_taken_again``: a real CPU run takes no audits (the host clock), so none are counted; planted records in
    its results (a top-up of 0.2 s in one, a top-up and a recheck of 1.5 s in another) are counted and summed."""
    assert duty(two_passes[0])["audits_taken_again"] == {"topped_up": 0, "rechecked": 0, "seconds": 0.0}
    run, results = _copy_of(two_passes[0], tmp_path)
    assert len(results) >= 2
    for path, records in zip(results, ({"audit_top_up": 0.2}, {"audit_top_up": 0.3, "audit_recheck": 1.5})):
        result = json.loads(path.read_text())
        for name, seconds in records.items():
            result["timing"][name] = {"why": "planted", "first_gap_ms": {}, "seconds": seconds}
        path.write_text(json.dumps(result))
    figure = duty(run)["audits_taken_again"]
    assert figure["topped_up"] == 2 and figure["rechecked"] == 1 and figure["seconds"] == pytest.approx(2.0)
    # The same records as each evaluation's columns (the report's "Audits taken twice") and MLflow metrics.
    from runner.analysis.records import records_from_run_dir
    from runner.tracking.child_record import child_record

    frame = records_from_run_dir(run)
    assert int(frame["audits_topped_up"].sum()) == 2 and int(frame["audits_rechecked"].sum()) == 1
    metrics = [child_record(run / "jobs" / result.eval_id, result, "commit").metrics for _, result in job_results(run)]
    assert sum(m.get("audits_topped_up", 0.0) for m in metrics) == 2.0
    assert sum(m.get("audits_rechecked", 0.0) for m in metrics) == 1.0


def test_evaluations_whose_batches_fell_short_of_batch_min_ms_are_counted(two_passes, tmp_path: Path):
    """``short_batches`` reads each job's ``batch_min_ms`` and its kept batches' spans: a least batch longer than
    every span counts every evaluation, by its pairs per batch, with the GPU's wait around those batches; one
    shorter than every span counts none; no least batch (this CPU run's default) gives no figure."""
    assert duty(two_passes[0])["short_batches"] is None
    run, results = _copy_of(two_passes[0], tmp_path)

    def least_batch(ms: float) -> None:
        for result in results:
            job_file = result.parent.parent / "job.json"
            job = json.loads(job_file.read_text())
            job["timing"]["batch_min_ms"] = ms
            job_file.write_text(json.dumps(job))

    least_batch(1e9)
    figures = duty(run)
    short = figures["short_batches"]
    pairs = [json.loads(result.read_text())["timing"]["batch_pairs"] for result in results]
    assert short["evaluations"] == short["of"] == len(results)
    assert short["by_batch_pairs"] == {n: pairs.count(n) for n in sorted(set(pairs))}
    assert short["around_batches_s"] == pytest.approx(figures["batches_rest_parts_s"]["around_batches"])
    assert [entry["median_span_ms"] for entry in short["shortest"]] == sorted(
        entry["median_span_ms"] for entry in short["shortest"]
    )
    least_batch(1e-9)
    assert duty(run)["short_batches"] == {
        "evaluations": 0,
        "of": len(results),
        "by_batch_pairs": {},
        "around_batches_s": 0.0,
        "shortest": [],
    }


def _per_batch(raw: dict) -> list[list[float]]:
    """Each kept batch's sample times, in the order taken (``order`` names each sample's side)."""
    taken = {side: iter(raw[side]) for side in ("reference", "candidate")}
    times = [next(taken[side]) for side in raw["order"]]
    size = len(times) // len(raw["batch_window"])
    return [times[index : index + size] for index in range(0, len(times), size)]


def test_overlap_sees_clashing_windows_and_none_between_sequential_runs(two_passes):
    assert overlap(*two_passes) == {"windows": [2, 2], "overlapping_pairs": 0, "examples": []}
    assert overlap(two_passes[0], two_passes[0])["overlapping_pairs"] >= 2  # each window with itself


def test_ncu_csv_is_summed_per_nvtx_range_and_compared(two_passes, tmp_path: Path):
    ours = {}
    for result in two_passes[0].glob("jobs/*/out/result.json"):
        data = json.loads(result.read_text())
        ours[data["task_id"]] = data["timing"]["reference"]["median_ms"]
    header = (
        '"ID","Process ID","Process Name","Host Name",'
        '"thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",'
        '"Kernel Name","Metric Name","Metric Unit","Metric Value"'
    )

    def row(index: int, task: str, nanoseconds: float) -> str:
        nvtx = f'1937  ""<default domain>:{task}:none:none:none:none:none:none"" '
        return f'"{index}","1937","python3","host","{nvtx}","kernel","gpu__time_duration.sum","ns","{nanoseconds:,.0f}"'

    half = ours["gelu_tanh"] * 1e6 / 2  # two kernels, half the time each
    lines = ["==PROF== Connected to process 1937", header, row(0, "gelu_tanh", half), row(1, "gelu_tanh", half)]
    lines.append(row(2, "not_in_the_run", 1000))
    csv = tmp_path / "ncu.csv"
    csv.write_text("\n".join(lines) + "\n")
    figures = ncu(csv, two_passes[0])
    (gelu,) = figures["tasks"]
    assert gelu["task"] == "gelu_tanh" and abs(gelu["diff_pct"]) < 0.01
    assert figures["max_abs_diff_pct"] == pytest.approx(abs(gelu["diff_pct"]))


def test_duty_judges_turns_per_gpu_lane(two_passes, tmp_path: Path):
    """With ``hardware.gpus=[0,1]`` each GPU has its own token: measurements on two GPUs at once are
    the point, measurements on one GPU at once a failure. The run's two results are put on the
    same stretch of time (the second's windows moved so that both measurements start together), first on two lanes, then on one."""
    run, (first, second) = _copy_of(two_passes[0], tmp_path)

    def turn_start(record: dict) -> float:
        return next(start for start, _, mode in record["windows"] if mode == "exclusive")

    anchor = turn_start(json.loads(first.read_text())["environment"]["device_token"])
    data = json.loads(second.read_text())
    record = data["environment"]["device_token"]
    shift = turn_start(record) - anchor  # the second's measurement starts when the first's does
    record["windows"] = [[start - shift, end - shift, mode] for start, end, mode in record["windows"]]
    own_path = json.loads(first.read_text())["environment"]["device_token"]["path"]
    for path, lanes, overlapping in (("another GPU's token", 2, 0), (own_path, 1, 1)):
        record["path"] = path
        second.write_text(json.dumps(data))
        figures = duty(run)
        assert (figures["lanes"], figures["overlapping_turns"]) == (lanes, overlapping)
        assert figures["duty_pct"] == pytest.approx(100 * figures["measured_s"] / (lanes * figures["wall_s"]))
        # The wall parts add up to the lanes' wall time, clashing turns or not.
        assert sum(figures["wall_parts_s"].values()) == pytest.approx(lanes * figures["wall_s"])
    single = duty(two_passes[0])
    assert single["lanes"] == 1 and single["overlapping_turns"] == 0


def test_a_result_without_a_token_record_is_no_lane_of_its_own(two_passes, tmp_path: Path):
    """A worker that crashed before it held the device's token (the orchestrator writes its result,
    with no ``device_token`` record) ran on the run's one GPU: the duty is still of one lane's wall
    time (an H100 run with eight such crashes reported 2 lanes and half its duty)."""
    run, (crashed, _) = _copy_of(two_passes[0], tmp_path)
    data = json.loads(crashed.read_text())
    del data["environment"]["device_token"]
    crashed.write_text(json.dumps(data))
    figures = duty(run)
    assert figures["lanes"] == 1
    assert figures["duty_pct"] == pytest.approx(100 * figures["measured_s"] / figures["wall_s"])


def _one_slow_batch(run_dir: Path, tmp_path: Path, plant) -> tuple[Path, list[Path], list[dict], list[dict]]:
    """A copy of ``run_dir`` whose first evaluation's second batch is 50% slow on the reference side, every
    sample else equal and the exits moved away (nothing of the CPU's own timing decides the counts);
    ``plant(results, raws)`` adds the events before the files are written."""
    run, paths = _copy_of(run_dir, tmp_path)
    results = [json.loads(path.read_text()) for path in paths]
    samples_paths = [path.with_name("samples.json") for path in paths]
    raws = [json.loads(path.read_text()) for path in samples_paths]
    for raw in raws:
        assert len(raw["batch_window"]) == len(raw["batch_placement"]) >= 4
        for side in ("reference", "candidate"):
            raw[side] = [1.0] * len(raw[side])
        raw["batch_host_wait_ms"] = [0.0] * len(raw["batch_window"])  # no batch waited for a core
    size = len(raws[0]["reference"]) // len(raws[0]["batch_window"])
    raws[0]["reference"][size : 2 * size] = [1.5] * size
    for result in results:
        result["finished_at"] += 1e6
    plant(results, raws)
    for path, value in [*zip(paths, results), *zip(samples_paths, raws)]:
        path.write_text(json.dumps(value))
    return run, paths, results, raws


def test_disturbed_batches_are_found_and_checked_against_other_workers_device_work(two_passes, tmp_path: Path):
    """One batch planted 50% slow on the reference side, and another worker's CUDA context made while it
    ran: the batch is the one disturbed, and the one batch near a context."""

    def context_during_the_slow_batch(results, raws):
        results[1]["environment"]["spare_cuda_context"] = raws[0]["batch_window"][1]

    run, paths, results, raws = _one_slow_batch(two_passes[0], tmp_path, context_during_the_slow_batch)
    found = disturbances(run)
    assert found["batches"] == sum(len(raw["batch_window"]) for raw in raws)
    assert found["disturbed"] == 1 and found["near_none"] == 0
    (row,) = found["largest"]
    assert (row["batch"], row["side"], row["near"]) == (1, "reference", ["cuda_context"])
    assert row["excess_pct"] == pytest.approx(50.0)
    assert found["near"]["cuda_context"] == {
        "all": 1,
        "disturbed": 1,
        "all_pct": 100 / found["batches"],
        "disturbed_pct": 100.0,
    }
    assert found["near"]["worker_exit"]["all"] == 0
    # A worker's own context is not a disturbance of its own measurement.
    results[0]["environment"]["spare_cuda_context"] = raws[0]["batch_window"][1]
    results[1]["environment"].pop("spare_cuda_context")
    paths[0].write_text(json.dumps(results[0]))
    paths[1].write_text(json.dumps(results[1]))
    assert disturbances(run)["near"]["cuda_context"]["all"] == 0


def test_disturbed_batches_are_checked_against_the_pre_warms_and_contexts_of_spares_dismissed_without_a_job(
    two_passes, tmp_path: Path
):
    """Regression: the spares a run dismisses without a job (a short run's every one, started as its first
    evaluations start) make their CUDA contexts and pre-warm beside its measurements, and no result recorded them: on
    the H100 a four-task run's first 2.6 s of batches were slowed beside none of the events known. Their lines in
    ``spares.jsonl``: a pre-warm over the slow batch, a context over a batch that was not slowed; a line that cannot
    be read, and one of a spare that had not finished its start, count for nothing. A result's own pre-warm window
    counts for the other evaluations' batches."""
    run, paths, results, raws = _one_slow_batch(two_passes[0], tmp_path, lambda results, raws: None)
    windows = raws[0]["batch_window"]
    lines = [
        {"pid": 11, "start_done": True, "spare_prewarm_window": windows[1], "spare_cuda_context": windows[3]},
        {"pid": 12, "start_done": False, "started": {"started_by": "fork server"}},
    ]
    (run / SPARES_LOG).write_text("\n".join(json.dumps(line) for line in lines) + "\n{not json\n[1, 2]\n")
    found = disturbances(run)
    assert found["disturbed"] == 1 and found["near_none"] == 0
    (row,) = found["largest"]
    assert (row["batch"], row["near"]) == (1, ["spare_prewarm"])
    assert (found["near"]["spare_prewarm"]["all"], found["near"]["spare_prewarm"]["disturbed"]) == (1, 1)
    assert (found["near"]["cuda_context"]["all"], found["near"]["cuda_context"]["disturbed"]) == (1, 0)
    # The same pre-warm recorded in another evaluation's result (a spare that got its job) counts the same way.
    (run / SPARES_LOG).unlink()
    results[1]["environment"]["spare_prewarm_window"] = windows[1]
    paths[1].write_text(json.dumps(results[1]))
    found = disturbances(run)
    assert found["largest"][0]["near"] == ["spare_prewarm"] and found["near"]["spare_prewarm"]["all"] == 1
    assert found["near"]["cuda_context"]["all"] == 0


def test_paced_sides_are_those_slower_behind_the_other_sides_samples(two_passes, tmp_path: Path):
    """A real run's first evaluation with its samples planted: the candidate's unled samples behind a reference
    sample 30% slow, every other sample (its led ones, those behind its own side, each batch's first, the
    reference's) at 1.0; every other candidate sample behind a reference one marked led. The candidate is the one
    side paced, by 30%, and its row says whether it was found to wait for the device; a samples file from before the
    leads were recorded is counted unreadable, not judged."""
    run, paths = _copy_of(two_passes[0], tmp_path)
    samples_file = paths[0].with_name("samples.json")
    raw = json.loads(samples_file.read_text())
    order, batches = raw["order"], len(raw["batch_window"])
    size = len(order) // batches
    assert size * batches == len(order) and batches >= 2
    values = {"reference": [], "candidate": []}
    led, behind = [[] for _ in range(batches)], {"led": 0, "behind_other": 0, "behind_own": 0}
    for index, side in enumerate(order):
        batch, position = divmod(index, size)
        value = 1.0
        if side == "candidate" and position and order[index - 1] == "reference":
            if behind["behind_other"] > behind["led"]:
                led[batch].append(position)
                behind["led"] += 1
            else:
                value = 1.3
                behind["behind_other"] += 1
        elif side == "candidate" and position:
            behind["behind_own"] += 1
        values[side].append(value)
    assert min(behind.values()) >= MIN_SAMPLES, behind  # enough of each group to be judged
    raw.update(values, batch_led=led)
    samples_file.write_text(json.dumps(raw))
    other = paths[1].with_name("samples.json")
    old = json.loads(other.read_text())
    old.pop("batch_led")
    other.write_text(json.dumps(old))

    found = host_pace(run)
    assert found["evaluations_unreadable"] == 1 and found["sides_checked"] == 2 and found["paced"] == 1
    (row,) = found["largest"]
    assert (row["side"], row["eval_id"]) == ("candidate", paths[0].parent.parent.name)
    assert row["excess_pct"] == pytest.approx(30.0) and row["queued_ms"] == 1.0
    assert row["median_ms"]["behind_other"] == 1.3 and row["samples"]["led"] == behind["led"]
    reference_ms = json.loads(paths[0].read_text())["timing"]["reference"]["median_ms"]
    assert row["other_side_median_ms"] == reference_ms and row["lead_ms"] is None  # the host clock does not lead
    assert found["led_pct"] == pytest.approx(100 * behind["led"] / len(order))
    assert row["waits_for_device"] is None  # the host clock does not probe for waits either
    # A side found to wait for the device says so in its row (``timing.waits_for_device``: its lead withheld).
    result = json.loads(paths[0].read_text())
    result["timing"]["waits_for_device"] = {"candidate": True}
    paths[0].write_text(json.dumps(result))
    assert host_pace(run)["largest"][0]["waits_for_device"] is True
    # Every candidate sample as slow, led or behind its own side too: its pace is its own, no side paced.
    raw["candidate"] = [1.3] * len(raw["candidate"])
    samples_file.write_text(json.dumps(raw))
    assert host_pace(run)["paced"] == 0


def test_disturbed_batches_are_counted_by_time_in_their_turn_and_since_another_workers_exit(two_passes, tmp_path: Path):
    """The planted slow batch falls in the bin of its start from its measurement's first batch, and in the bin of
    its end from the last exit of another worker before it; the measured worker's own exit is not one, and a batch
    with no exit before it counts in the last bin. Every batch counts once in each."""

    def exit_before_the_slow_batch(results, raws):
        results[0]["finished_at"] = raws[0]["batch_window"][1][1] - 0.05  # its own: no exit of another's
        results[1]["finished_at"] = raws[0]["batch_window"][1][1] - 0.6

    run, paths, results, raws = _one_slow_batch(two_passes[0], tmp_path, exit_before_the_slow_batch)
    found = disturbances(run)
    assert found["disturbed"] == 1
    for key in ("by_time_in_turn", "by_time_since_exit"):
        rows = found[key]
        assert [row["from_s"] for row in rows] == pytest.approx([k * WHEN_BIN_S for k in range(WHEN_BINS + 1)])
        assert sum(row["batches"] for row in rows) == found["batches"]
        assert sum(row["disturbed"] for row in rows) == 1
    windows = raws[0]["batch_window"]
    in_turn = min(int((windows[1][0] - windows[0][0]) / WHEN_BIN_S), WHEN_BINS)
    assert found["by_time_in_turn"][in_turn]["disturbed"] == 1
    hit = found["by_time_since_exit"][int(0.6 / WHEN_BIN_S)]
    assert hit["disturbed"] == 1 and hit["disturbed_pct"] == 100 * 1 / hit["batches"]
    # Without the other worker's exit before it, the batch has none: the last bin.
    results[1]["finished_at"] += 1e6
    paths[1].write_text(json.dumps(results[1]))
    assert disturbances(run)["by_time_since_exit"][WHEN_BINS]["disturbed"] == 1


def test_disturbed_batches_are_counted_by_time_since_the_device_was_last_idle(two_passes, tmp_path: Path):
    """Two evaluations' batches laid out 0.1 s apart, the second evaluation's after the first's: with a gap over
    ``IDLE_GAP_S`` before the second's first batch, the planted slow batch (its second) counts from that batch; with a
    gap under it, from the first evaluation's first batch, the start of one busy stretch. Every batch counts once."""
    step = 0.1

    def lay_out(gap: float):
        def plant(results, raws):
            first, second = raws[1], raws[0]  # the slow batch is raws[0]'s second
            first["batch_window"] = [[k * step, k * step + step / 2] for k in range(len(first["batch_window"]))]
            begin = first["batch_window"][-1][1] + gap
            count = len(second["batch_window"])
            second["batch_window"] = [[begin + k * step, begin + k * step + step / 2] for k in range(count)]

        return plant

    for gap, since in ((IDLE_GAP_S + 0.05, step), (IDLE_GAP_S - 0.05, None)):
        run, _, _, raws = _one_slow_batch(two_passes[0], tmp_path / str(gap), lay_out(gap))
        rows = disturbances(run)["by_time_since_idle"]
        assert sum(row["batches"] for row in rows) == sum(len(raw["batch_window"]) for raw in raws)
        if since is None:  # one stretch from the first evaluation's first batch
            since = raws[0]["batch_window"][1][0] - raws[1]["batch_window"][0][0]
        (hit,) = [k for k, row in enumerate(rows) if row["disturbed"]]
        assert hit == min(int(since / WHEN_BIN_S), WHEN_BINS), (gap, since)
        assert rows[hit]["disturbed"] == 1


@pytest.mark.parametrize(
    "record, kind", [("preloaded_kernels", "preload"), ("preloaded_candidate", "candidate_preload")]
)
def test_a_batch_during_another_workers_preload_is_counted_near_it(two_passes, tmp_path: Path, record, kind):
    """Another worker capturing its reference's calls (``environment.preloaded_kernels.window``), or compiling and
    capturing its torch_compile candidate's (``preloaded_candidate``), while the slow batch ran: that batch is near
    that kind of preload, and no other batch is near anything."""

    def preload_during_the_slow_batch(results, raws):
        results[1]["environment"][record] = {
            "shapes": {"small": "loaded"},
            "seconds": 0.1,
            "window": raws[0]["batch_window"][1],
        }

    run, *_ = _one_slow_batch(two_passes[0], tmp_path, preload_during_the_slow_batch)
    found = disturbances(run)
    assert found["disturbed"] == 1 and found["near_none"] == 0
    assert found["largest"][0]["near"] == [kind]
    assert (found["near"][kind]["all"], found["near"][kind]["disturbed"]) == (1, 1)
    others = {"cuda_context", "preload", "candidate_preload"} - {kind}
    assert all(found["near"][other]["all"] == 0 for other in others)


def test_a_batch_whose_measuring_thread_waited_for_a_core_is_near_a_host_wait(two_passes, tmp_path: Path):
    """The slowed batch's measuring thread waited 2 ms for a core, another batch's 0.1 ms (under
    ``HOST_WAIT_MIN_MS``) and a third's 1 ms: the slowed one is near a ``host_wait``, two batches of all are, and a
    run from before the waits were kept (no ``batch_host_wait_ms``) has none."""

    def waits(results, raws):
        raws[0]["batch_host_wait_ms"][1] = 2.0
        raws[0]["batch_host_wait_ms"][2] = HOST_WAIT_MIN_MS / 2.5
        raws[0]["batch_host_wait_ms"][3] = 1.0

    run, paths, results, raws = _one_slow_batch(two_passes[0], tmp_path, waits)
    found = disturbances(run)
    assert found["disturbed"] == 1 and found["near_none"] == 0
    assert found["largest"][0]["near"] == ["host_wait"]
    assert (found["near"]["host_wait"]["all"], found["near"]["host_wait"]["disturbed"]) == (2, 1)
    assert found["thresholds"]["host_wait_ms"] == HOST_WAIT_MIN_MS
    samples_file = paths[0].with_name("samples.json")
    raw = json.loads(samples_file.read_text())
    del raw["batch_host_wait_ms"]
    samples_file.write_text(json.dumps(raw))
    assert disturbances(run)["near"]["host_wait"]["all"] == 0


def test_a_compile_warm_ups_context_compiles_and_end_are_events_a_slowed_batch_is_held_against(
    two_passes, tmp_path: Path
):
    """The warm-ups beside the sweep (``warmup.jsonl``) made their CUDA contexts, compiled and ended off the token:
    a slowed batch during one warm-up's context and another's end is near those two kinds, a compile during an
    unslowed batch counts among all batches only, and an end is read from ``finished_at`` where the line has one
    (else from ``ended``, as a line from before it). Even the measured evaluation's own warm-up counts: it is
    another process."""
    run, paths, results, raws = _one_slow_batch(two_passes[0], tmp_path, lambda results, raws: None)
    slow, other = raws[0]["batch_window"][1], raws[0]["batch_window"][3]
    far = slow[0] + 1e6
    lines = [
        {"eval_id": results[0]["eval_id"], "started": far, "ended": far, "spare_cuda_context": slow},
        {"eval_id": "w2", "started": far, "ended": far, "compiles": [other], "finished_at": far},
        {"eval_id": "w3", "started": far, "ended": slow[0], "finished_at": far},  # its finished_at is far away
        {"eval_id": "w4", "started": far, "ended": slow[0]},  # no finished_at: its end is read from ``ended``
    ]
    (run / WARMUP_LOG).write_text("".join(json.dumps(line) + "\n" for line in lines))
    found = disturbances(run)
    assert found["disturbed"] == 1 and found["near_none"] == 0
    assert found["largest"][0]["near"] == ["warmup_context", "warmup_exit"]
    windows = [window for raw in raws for window in raw["batch_window"]]
    exit_window = (slow[0], slow[0] + EXIT_WINDOW_S)
    near_exit = sum(1 for start, end in windows if start < exit_window[1] and end > exit_window[0])
    assert found["near"]["warmup_exit"]["all"] == near_exit and found["near"]["warmup_exit"]["disturbed"] == 1
    assert (found["near"]["warmup_context"]["all"], found["near"]["warmup_context"]["disturbed"]) == (1, 1)
    assert (found["near"]["warmup_compile"]["all"], found["near"]["warmup_compile"]["disturbed"]) == (1, 0)
    assert found["near"]["cuda_context"]["all"] == 0
    # Without the warm-ups' log, the same batch is near nothing.
    (run / WARMUP_LOG).unlink()
    assert disturbances(run)["near_none"] == 1


def test_slot_parts_add_up_to_each_slots_time(two_passes, tmp_path: Path):
    """Where the slots' time went: every part from a real run's marks, adding up to each slot's time from
    taking its evaluation to reading the GPU after it; a second try's first is a part of its own."""
    run, paths = _copy_of(two_passes[0], tmp_path)
    results = [json.loads(path.read_text()) for path in paths]
    slots = [result["environment"]["lane"]["slot"] for result in results]
    total = sum(slot["read_after"] - slot["taken"] for slot in slots)
    parts = duty(run)["slot_parts_s"]
    assert set(parts) == {
        "prepare", "health_gate", "memory_admission", "worker_start", "worker", "worker_end", "collect",
        "read_gpu_after", "first_try",
    }  # fmt: skip
    assert all(seconds >= 0 for seconds in parts.values()) and parts["first_try"] == 0
    assert sum(parts.values()) == pytest.approx(total)
    assert parts["worker"] == pytest.approx(sum(r["finished_at"] - r["started_at"] for r in results))
    # The first result as a second try: its first try ran for 1.5 s of what was its admission step.
    slot = slots[0]
    slot["gated"] -= 2.0
    slot["first_try"] = {"admitted": slot["gated"] + 0.25, "ran": slot["gated"] + 1.75}
    paths[0].write_text(json.dumps(results[0]))
    again = duty(run)["slot_parts_s"]
    assert again["first_try"] == pytest.approx(1.5)
    assert again["memory_admission"] == pytest.approx(parts["memory_admission"] + 0.5)
    assert sum(again.values()) == pytest.approx(total)  # the gate's step shortened by the 2 s moved


def test_between_turns_splits_hand_overs_from_cohorts(two_passes):
    """The time between turns in two kinds (a full suite on the H100: 182 hand-overs of
    43 ms, the next warm-up beside the last checks; 39 gaps of 0.73 s, seven evaluations' first shared phases
    each): read off the windows, per lane."""
    from runner.analysis.between_turns import HAND_OVER_S, between_turns

    shared, exclusive = "shared", "exclusive"
    lane = [
        ("a", [(0.0, 0.5, shared), (0.6, 1.6, exclusive), (1.6, 1.65, shared)], None),  # first phase, turn 0.6-1.6
        ("b", [(0.1, 0.55, shared), (1.6, 1.63, shared), (1.66, 2.6, exclusive)], None),  # warm-up beside the checks
        ("c", [(2.7, 3.4, shared), (3.4, 3.43, shared), (3.5, 4.0, exclusive)], None),  # started meanwhile: 0.9 s gap
        ("d", [(2.65, 3.45, shared)], None),  # a cohort's other member; its turn not reached (it failed its checks)
    ]
    other_lane = [("e", [(0.0, 0.2, shared), (0.2, 1.0, exclusive)], None)]  # one turn: no gap
    clashing = [
        ("f", [(0.0, 3.0, exclusive)], None), ("g", [(1.0, 1.5, exclusive)], None), ("h", [(3.05, 4.0, exclusive)], None)
    ]  # fmt: skip
    figures = between_turns([lane, other_lane, clashing])
    assert figures["hand_overs"]["n"] == 2 and figures["hand_overs"]["s"] == pytest.approx(0.06 + 0.05)
    assert figures["longer"]["n"] == 1 and figures["longer"]["s"] == pytest.approx(0.9)
    assert figures["longer"]["median_first_phases"] == 2  # both first phases lie in the gap 2.6-3.5
    assert figures["longer"]["without_first_phases"] == {"n": 0, "s": 0, "median_s": None}
    # A hand-over that outlasted HAND_OVER_S (the next warm-up probed a side for a wait): longer, with no first phase.
    slow_hand_over = [
        ("i", [(0.0, 0.3, shared), (0.4, 1.4, exclusive), (1.4, 1.45, shared)], None),
        ("j", [(0.05, 0.35, shared), (1.4, 1.65, shared), (1.65, 2.5, exclusive)], None),  # its warm-up 0.25 s
    ]
    alone = between_turns([slow_hand_over])["longer"]
    assert alone["n"] == 1 and alone["without_first_phases"]["n"] == 1
    assert alone["without_first_phases"]["s"] == pytest.approx(0.25) and alone["median_first_phases"] == 0
    assert 0.06 < HAND_OVER_S < 0.9
    # The gap waited for d's first phase (0.8 s), 0.1 s longer than c's (0.7 s): d is named.
    assert figures["longer"]["waited_for_slowest_s"] == pytest.approx(0.1)
    (slowest,) = figures["longer"]["slowest"]
    assert slowest["task"] == "d" and slowest["gap_s"] == pytest.approx(0.9)
    assert (slowest["window_s"], slowest["next_slowest_s"]) == (pytest.approx(0.8), pytest.approx(0.7))
    # One evaluation at a time: between the two turns, the second's worker started and ran its first phase. A forked
    # worker can start within HAND_OVER_S on a fast host (85 ms seen here), so the kind follows the real gap.
    turns = sorted(
        (start, end)
        for path in two_passes[0].glob("jobs/*/out/result.json")
        for start, end, mode in json.loads(path.read_text())["environment"]["device_token"]["windows"]
        if mode == exclusive
    )
    gap = turns[1][0] - turns[0][1]
    real = duty(two_passes[0])["between_turns"]
    kind, other = ("longer", "hand_overs") if gap > HAND_OVER_S else ("hand_overs", "longer")
    assert (real[kind]["n"], real[other]["n"]) == (1, 0) and real[kind]["s"] == pytest.approx(gap)
    assert real["longer"]["median_first_phases"] == (1 if kind == "longer" else None)
    # What the gap waited for: the second measurement's own states, adding up to it (its worker's start and first
    # phase, one evaluation at a time); the one slot held one evaluation or the other throughout.
    waited = real["longer"]["next_measured_s"]
    assert sum(waited.values()) == pytest.approx(real["longer"]["s"])
    assert (waited.get("first_phase", 0) > 0) == (kind == "longer")
    if kind == "longer":
        assert set(waited) <= set(SLOT_STATES) | {NOT_IN_A_SLOT}


def _evaluation(taken, gated, admitted, started, windows, finished, read_after):
    """A result as ``evaluation_states`` reads it: its slot's marks, its worker's start and end."""
    from types import SimpleNamespace

    slot = {"taken": taken, "gated": gated, "admitted": admitted, "read_after": read_after}
    return SimpleNamespace(environment={"lane": {"slot": slot}}, started_at=started, finished_at=finished), windows


def test_between_turns_says_what_each_longer_gap_waited_for():
    """Two slots: a measures, b waits for memory meanwhile and starts its first phase only after a's turn, so the
    gap between the turns is b's worker start, first phase and approach; the slots' seconds in the gap are a's end
    and b's states, and the rest of them held no evaluation; a warm-up's windows in the gap are counted, clipped;
    once b had asked for its turn it waited for the warm-up's window that cut in, told to at 2.3 s."""
    from runner.analysis.between_turns import between_turns
    from runner.analysis.slot_states import WARMUP_CUTTING_IN, WARMUP_GATED, evaluation_states, warmup_states

    shared, exclusive = "shared", "exclusive"
    a = _evaluation(0.0, 0.05, 0.1, 0.2, [(0.3, 0.8, shared), (0.9, 1.0, shared), (1.0, 2.0, exclusive),
                                          (2.0, 2.05, shared)], 2.2, 2.3)  # fmt: skip
    b = _evaluation(0.0, 0.05, 1.5, 1.6, [(2.05, 2.5, shared), (2.5, 2.55, shared), (2.6, 3.6, exclusive),
                                          (3.6, 3.65, shared)], 3.8, 3.9)  # fmt: skip
    told = {"started": 1.4, "ended": 2.7, "cut_in_told": 2.3}
    warm_up = ("warm-up:x", [(1.5, 1.6, shared), (2.1, 2.2, shared), (2.5, 2.58, shared)], warmup_states(told))
    lane = [(name, windows, evaluation_states(result, windows)) for name, (result, windows) in (("a", a), ("b", b))]
    figures = between_turns([[*lane, warm_up]], slots=2)["longer"]
    assert figures["n"] == 1 and figures["s"] == pytest.approx(0.6)
    assert figures["next_measured_s"] == {
        "before_first_phase": pytest.approx(0.05), "first_phase": pytest.approx(0.45),
        "approach": pytest.approx(0.05), "waiting_for_turn": pytest.approx(0.05),
    }  # fmt: skip
    assert figures["slots_s"] == {
        "checks_after_timing": pytest.approx(0.05), "after_device_work": pytest.approx(0.15),
        "worker_end": pytest.approx(0.1), "before_first_phase": pytest.approx(0.05),
        "first_phase": pytest.approx(0.45), "approach": pytest.approx(0.05), "waiting_for_turn": pytest.approx(0.05),
        "no_evaluation": pytest.approx(0.3),
    }  # fmt: skip
    assert figures["warmup_windows_s"] == pytest.approx(0.18)
    # b asked at its approach's end (2.55) and its turn began at 2.6: the warm-up's window (to 2.58) was open for
    # 0.03 s of the wait and closed last; the lock's hand-over took the rest.
    waited = figures["waited_for_turn"]
    assert waited["s"] == pytest.approx(0.05)
    assert waited["held_by_s"] == {WARMUP_CUTTING_IN: pytest.approx(0.03), "nobody": pytest.approx(0.02)}
    assert waited["ended_by"] == {WARMUP_CUTTING_IN: {"n": 1, "s": pytest.approx(0.05)}}
    # A warm-up's states: at the gate until told; told never (it ended first), at the gate throughout; where every
    # warm-up cut in (no ``cut_in_told``), cutting in from its start.
    assert warmup_states(told) == [(1.4, WARMUP_GATED), (2.3, WARMUP_CUTTING_IN), (2.7, "done")]
    assert warmup_states({**told, "cut_in_told": None}) == [(1.4, WARMUP_GATED), (2.7, "done")]
    assert warmup_states({"started": 1.4, "ended": 2.7}) == [(1.4, WARMUP_CUTTING_IN), (2.7, "done")]
    # Before its slot took it, b was in no slot; a mark read on another clock before the last counts from it.
    states = evaluation_states(b[0], b[1])
    assert states[0] == (0.0, "prepare") and states[-1] == (3.9, "done")
    assert [when for when, _ in states] == sorted(when for when, _ in states)
    # Every mark of a slot, a first try that ran out of memory among them: its states follow the slot's steps
    # (``slot_parts``), the worker's split by its windows, and add up to the same parts.
    from types import SimpleNamespace

    from runner.analysis.slot_states import seconds_in_states, slot_parts

    marks = {"taken": 0.0, "prepared": 0.1, "gated": 0.2, "first_try": {"admitted": 0.3, "ran": 0.4}, "admitted": 0.5,
             "ran": 2.1, "collected": 2.2, "read_after": 2.3}  # fmt: skip
    full = SimpleNamespace(environment={"lane": {"slot": marks}}, started_at=0.6, finished_at=2.0)
    windows = [(0.7, 0.8, shared), (0.9, 1.0, shared), (1.0, 1.5, exclusive), (1.5, 1.6, shared)]
    states = evaluation_states(full, windows)
    assert states == [
        (0.0, "prepare"), (0.1, "health_gate"), (0.2, "memory_admission"), (0.3, "first_try"),
        (0.4, "memory_admission"), (0.5, "worker_start"), (0.6, "before_first_phase"), (0.7, "first_phase"),
        (0.8, "ready"), (0.9, "approach"), (1.0, "waiting_for_turn"), (1.0, "turn"), (1.5, "after_device_work"),
        (1.5, "checks_after_timing"), (1.6, "after_device_work"), (2.0, "worker_end"), (2.1, "collect"),
        (2.2, "read_gpu_after"), (2.3, "done"),
    ]  # fmt: skip
    in_states = seconds_in_states(states, 0.0, 2.3)
    worker = ("before_first_phase", "first_phase", "ready", "approach", "turn", "checks_after_timing",
              "after_device_work")  # fmt: skip
    parts = slot_parts([(None, full)])
    assert parts["worker"] == pytest.approx(sum(in_states.pop(state) for state in worker))
    assert in_states == {name: pytest.approx(parts[name]) for name in in_states}
    assert set(in_states) | {"worker"} == {name for name, seconds in parts.items() if seconds}
    late, _ = _evaluation(1.0, 1.05, 1.5, 1.4, [], 1.6, 1.7)  # the worker's start read 0.1 s before its admission
    assert evaluation_states(late, []) == [
        (1.0, "prepare"), (1.05, "memory_admission"), (1.5, "worker_start"),
        (1.5, "before_first_phase"), (1.6, "worker_end"), (1.7, "done"),
    ]  # fmt: skip


def _bench(*args: str):
    return subprocess.run(
        [sys.executable, "-m", "runner.bench", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


def test_processes_times_each_task_in_fresh_processes_and_reports_the_spreads():
    proc = _bench("processes", "--device", "cpu", "--processes", "3", "--samples", "12", "relu_fp16", "layout")
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    assert (figures["method"], figures["device"], figures["shape"], figures["gpu"]) == (
        "reference",
        "cpu",
        "small",
        None,
    )
    pids = [p["pid"] for p in figures["processes"]]
    assert len(set(pids)) == 3 and os.getpid() not in pids  # three processes of their own
    # The hold is device memory: on the CPU no process holds any.
    assert figures["hold_fraction"] == 0.5 and [p["held_gib"] for p in figures["processes"]] == [0.0, 0.0, 0.0]
    layout = {t.task_id for t in load_native_tasks(TASKS_DIR) if t.category == "layout"}
    assert set(figures["tasks"]) == layout | {"relu_fp16"}
    for task_id, row in figures["tasks"].items():
        for side in ("reference", "candidate"):
            times = row[f"{side}_ms"]
            assert len(times) == 3 and min(times) > 0, task_id
            assert row[f"{side}_spread_pct"] == pytest.approx(100 * (max(times) / min(times) - 1))
        assert row["speedups"] == pytest.approx([r / c for r, c in zip(row["reference_ms"], row["candidate_ms"])])
        assert row["noise_pct"] > 0
        assert row["between_over_noise"] >= 0
        # Each process timed the evaluation's four placements; on the CPU no input moves to an offset.
        assert row["placements"] == [4, 4, 4] and row["input_offsets"] == [None, None, None]
    assert set(figures["beyond_chance"]) <= set(figures["tasks"])
    assert figures["largest"][0] == max(figures["tasks"], key=lambda t: figures["tasks"][t]["speedup_spread_pct"])


def test_processes_times_a_methods_candidate_beside_the_reference():
    """torch_compile's candidate (inductor's C++ on the CPU) is compiled and timed in each process."""
    proc = _bench(
        "processes",
        "--device",
        "cpu",
        "--processes",
        "2",
        "--samples",
        "8",
        "--method",
        "torch_compile",
        "softcap_tanh_fp32",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    assert figures["method"] == "torch_compile"
    row = figures["tasks"]["softcap_tanh_fp32"]
    (task,) = [t for t in load_native_tasks(TASKS_DIR) if t.task_id == "softcap_tanh_fp32"]
    assert row["candidate_hash"] == METHODS.get("torch_compile")(task, {}).content_hash
    assert len(row["speedups"]) == 2 and all(s > 0 for s in row["speedups"])


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["relu_fp16", "no_such_task"], 2, "no task or category named no_such_task"),
        (
            ["--method", "torch_compil", "relu_fp16"],
            2,
            "unknown method 'torch_compil' (known: directory, reference, torch_compile); did you mean 'torch_compile'?",
        ),
        (["--processes", "1", "relu_fp16"], 2, "--processes needs 2 or more"),
        (["--hold-fraction", "0.95", "relu_fp16"], 2, "--hold-fraction must lie in [0, 0.9]"),
        (["--hold-fraction", "-0.1", "relu_fp16"], 2, "--hold-fraction must lie in [0, 0.9]"),
        (["--device", "cuda:99", "relu_fp16"], 1, "process 0 failed"),
        (["--shape", "huge", "relu_fp16"], 1, "relu_fp16 has no shape 'huge'"),
    ],
)
def test_processes_rejects_bad_input_with_one_line(args, code, says):
    proc = _bench("processes", "--samples", "4", *args)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_processes_stops_a_process_past_its_limit(monkeypatch):
    import runner.process_modes as process_modes_module

    monkeypatch.setattr(process_modes_module, "PROCESS_LIMIT_S", 0.2)  # under the child's own import of torch
    (task,) = [t for t in load_native_tasks(TASKS_DIR) if t.task_id == "relu_fp16"]
    with pytest.raises(RuntimeError, match=r"process 0 ran past 0\.2 s"):
        process_modes_module.process_modes([str(task.path)], 2, device="cpu")


def test_the_sweep_start_follows_the_first_evaluation_from_the_process_start(two_passes, tmp_path: Path):
    """How long the sweep's first job and measurement took to come from the process's start, and what they waited
    on: on the H200 machine the first measurement came 8.1 s in, after the fork server's imports (BENCHMARKS.md,
    forty-sixth session). Of the last invocation's evaluations only: a resumed run's earlier ones are not its start."""
    run, results = _copy_of(two_passes[0], tmp_path)
    start = duty(run)["sweep_start_s"]
    assert start["from"] == "process start"
    chain = ("fork_server_started", "fork_server_ready", "first_worker_started", "first_job_given")
    chain += ("first_job_started", "first_device_work", "first_measurement")
    assert all(start[step] is not None for step in chain)
    assert 0 < start["fork_server_started"] < start["sweep_started"]  # it imports during the set-up
    assert [start[step] for step in chain] == sorted(start[step] for step in chain)
    assert start["sweep_started"] <= start["first_slot_taken"] <= start["first_job_given"]
    manifest = json.loads((run / "manifest.json").read_text())
    last = manifest["last_invocation"]
    assert start["sweep_started"] == pytest.approx(last["sweep_started"] - last["process_started"])
    assert start["sweep_started"] == pytest.approx(manifest["setup_s"], abs=0.05)
    # The evaluation that took its slot first belongs to an earlier invocation: the other one is the start now.
    taken = sorted(json.loads(path.read_text())["environment"]["lane"]["slot"]["taken"] for path in results)
    last["sweep_started"] = (taken[0] + taken[1]) / 2
    (run / "manifest.json").write_text(json.dumps(manifest))
    later = duty(run)["sweep_start_s"]
    assert later["first_slot_taken"] == pytest.approx(taken[1] - last["process_started"])
    assert later["first_measurement"] > start["first_measurement"]
    # A run given its arguments in an older process: from its sweep's start; one from before this was kept: none.
    last["process_started"] = None
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert duty(run)["sweep_start_s"]["from"] == "sweep start" and duty(run)["sweep_start_s"]["sweep_started"] == 0
    del manifest["last_invocation"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert duty(run)["sweep_start_s"] is None
