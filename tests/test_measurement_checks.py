"""The judgments around a measurement: roofline floors, throttled batches, unjoined stream work.

Pure functions on hand-made readings with known answers; the GPU runs them for real in
tests/test_gpu.py.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from runner.analysis.roofline import PHYSICS_MARGIN, roofline_for
from runner.worker.clocks import ClockMonitor, ClockReading
from runner.worker.integrity import unjoined_work
from runner.worker.samplers import HostSampler
from tests.conftest import DOUBLING_TASK, in_process_job

PEAKS = {"bandwidth_tbps": 2.0, "tflops": {"float32": 50.0, "bfloat16": 1000.0, "int8": 2000.0}}
COPY = {"flops": "n", "bytes": "8 * n", "dtype": "float32"}
GEMM = {"flops": "2 * n * n * n", "bytes": "2 * 3 * n * n", "dtype": "bfloat16"}


def test_memory_bound_floor_and_achieved_figures():
    roof = roofline_for(COPY, {"n": 250_000_000}, PEAKS)  # 2 GB at 2 TB/s: 1 ms
    assert roof.bound == "memory" and math.isclose(roof.floor_ms, 1.0) and math.isclose(roof.physics_floor_ms, 1.0)
    achieved = roof.achieved(2.0)
    assert math.isclose(achieved["tbps"], 1.0) and math.isclose(achieved["sol_pct"], 50.0)
    assert roof.impossible(1.0) is None and roof.impossible(PHYSICS_MARGIN * 1.0 * 1.001) is None
    assert "physical floor" in roof.impossible(0.5)


def test_compute_bound_floor_uses_the_dtype_peak_and_physics_the_fastest():
    roof = roofline_for(GEMM, {"n": 10_000}, PEAKS)  # 2 TFLOP: 2 ms at 1000 TFLOP/s, 1 ms at 2000
    assert roof.bound == "compute" and math.isclose(roof.floor_ms, 2.0) and math.isclose(roof.physics_floor_ms, 1.0)
    assert roof.impossible(1.5) is None  # faster than bf16 allows, possible in int8/fp8 math
    assert roof.impossible(0.5) is not None


def test_no_roofline_without_peaks_or_formulas():
    assert roofline_for(COPY, {"n": 10}, None) is None
    assert roofline_for({"flops": None, "bytes": None, "dtype": "float32"}, {"n": 10}, PEAKS) is None


def _reading(clock=1980, mask=0, power=0, thermal=0):
    return ClockReading(clock, mask, power, thermal)


@pytest.mark.parametrize(
    ("before", "after", "throttled", "why"),
    [
        (_reading(), _reading(1970), False, ""),
        (_reading(), _reading(mask=0x1), False, ""),  # idle is not a slowdown
        (_reading(), _reading(mask=0x4), False, ""),  # the power cap: a heavy kernel's steady state
        (_reading(power=5), _reading(power=3_000_005), False, ""),
        (_reading(mask=0x20), _reading(), True, "sw_thermal_slowdown"),
        (_reading(mask=0x8), _reading(), True, "hw_slowdown"),
        (_reading(thermal=1), _reading(thermal=2), True, "thermal violation"),
    ],
)
def test_a_batch_is_thrown_away_when_heat_or_hardware_slowed_it(before, after, throttled, why):
    judged = ClockMonitor(None).judge(before, after)
    assert judged.throttled is throttled and why in judged.why
    assert judged.sm_clock_mhz == (before.sm_clock_mhz + after.sm_clock_mhz) / 2


def test_power_capped_batches_are_counted_and_discarded_only_on_request():
    capped = ClockMonitor(None).judge(_reading(power=5), _reading(mask=0x4, power=3_000_005))
    assert capped.power_capped and not capped.throttled
    strict = ClockMonitor(None).judge(_reading(power=5), _reading(mask=0x4, power=3_000_005), True)
    assert strict.throttled and "sw_power_cap" in strict.why and "power violation 3.000 ms" in strict.why


def test_clock_monitor_off_a_gpu_says_why():
    monitor = ClockMonitor(None)
    assert not monitor.available and monitor.why == "not a CUDA device"


def test_unjoined_stream_work_is_the_candidates_excess_sync_gap():
    honest = {"reference": 0.012, "candidate": 0.015}
    assert unjoined_work(honest, 1.0) is None
    hidden = {"reference": 0.012, "candidate": 0.95}  # events saw 0.05 ms, the synchronised call ~1 ms
    assert "another stream" in unjoined_work(hidden, 0.05)
    assert unjoined_work({}, 1.0) is None  # CPU: no audit
    tiny = {"reference": 0.010, "candidate": 0.025}  # 15 us of jitter on a tiny kernel: not evidence
    assert unjoined_work(tiny, 0.01) is None
    triton = {"reference": 0.093, "candidate": 0.133}  # H100, honest Triton gelu: launch latency only
    assert unjoined_work(triton, 0.715) is None
    compiled = {"reference": 0.310, "candidate": 0.655}  # H100, a torch.compile graph: 48% of its audit
    assert unjoined_work(compiled, 0.378) is None


def test_embedding_floor_counts_only_what_a_fused_kernel_must_move():
    """Regression (H100, torch_compile over the full suite): the minimal-bytes formula of the NLLB
    embedding task counted three rows per token, padding included, so a fused kernel at 0.156 ms
    was under 90% of a 0.24 ms "floor" and flagged ``faster_than_physics``. A floor must not exceed
    what an ideal kernel moves on the inputs the task generates: the ids, the output, and one
    embedding row per real token (padding shares a row; the position table stays in L2)."""
    import torch

    from runner.paths import TASKS_DIR
    from runner.tasks.formulas import evaluate
    from runner.tasks.loader import load_native_tasks
    from runner.worker.loading import import_file

    (task,) = [t for t in load_native_tasks(TASKS_DIR) if t.task_id == "embedding_scale_sinusoidal_pos_nllb_fp16"]
    dims = task.shapes["perf"]
    module = import_file(task.path, "kbench_nllb_floor")
    torch.manual_seed(0)
    (ids,) = module.get_inputs(dims["batch"], dims["seq"], dims["vocab"])
    real_tokens = int((ids != module.PAD).sum())
    ideal = 8 * ids.numel() + 2 * ids.numel() * dims["d_model"] + 2 * real_tokens * dims["d_model"]
    assert PHYSICS_MARGIN * evaluate(task.bytes, dims) <= ideal


class _ScriptedNvml(ClockMonitor):
    """Test double at the NVML boundary (no GPU here): readings from a script, every read counted.

    ``script`` holds one (throttle mask, thermal-violation growth) per read, in order; past its
    end every reading is cool. Without cool-downs, read 0 opens the measurement, read j is taken
    while batch j runs (just after its launch) and batch j is judged by reads j - 1 to j + 1.
    """

    def __init__(self, script: list[tuple[int, int]]) -> None:
        self.available, self.why = True, ""
        self.reads = 0
        self.script = script
        self.thermal_ns = 0

    def read(self) -> ClockReading:
        mask, grew = self.script[self.reads] if self.reads < len(self.script) else (0, 0)
        self.reads += 1
        self.thermal_ns += grew
        return _reading(clock=1980, mask=mask, thermal=self.thermal_ns)


def _measure_with(monitor, **overrides):
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    options = dict(min_samples=4, max_samples=12, batch=2, warmup_ms=0.0, target_noise=0.0, time_cap_s=30)
    settings = TimingSettings(**{**options, **overrides})
    tools = timing_module.Instruments(HostSampler(), monitor)  # built before the turn, as the worker does
    return timing_module.measure_pair(
        lambda: None, lambda: None, torch.device("cpu"), settings, "small", 0, tools=tools
    )


COOL, HOT = (0, 0), (0, 1000)  # a reading; one during which the thermal-violation counter grew


def test_throttled_batches_are_taken_again_with_one_clock_read_per_batch():
    # Read 2 (while batch 2 runs) is hot: batch 1 (reads 0-2) is thrown away with batch 2, queued behind it;
    # one cool-down read; batch 3 opens on it, and read 4 (during batch 4) is hot: batch 3 and 4 go the same way.
    monitor = _ScriptedNvml([COOL, COOL, HOT, COOL, HOT, COOL])
    result, raw = _measure_with(monitor)
    assert result.throttled_batches == 2 and all(
        t["why"].startswith("thermal violation") and t["next_discarded"] for t in raw["throttled_batches"]
    )
    assert result.reference.samples == result.candidate.samples == 12  # the thrown-away batches were retaken
    kept_batches, thrown_away = 12 // 2, 2 * 2
    # The first, one per batch launched (kept or not), one per cool-down, the last after the last batch.
    assert monitor.reads == 1 + kept_batches + thrown_away + 2 + 1
    assert set(raw["sm_clock_mhz"]["reference"]) == {1980}


def test_the_opening_clock_reading_is_taken_before_the_turn_and_a_slowdown_meanwhile_counts_against_batch_1():
    """NVML's first reading comes before the turn (2-5 ms on the H100, then beside the last measurement's checks
    after timing); the thermal violation counter growing while the turn is awaited throws the first batch away."""
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    class WaitedMonitor(_ScriptedNvml):
        def __init__(self):
            super().__init__([])
            self.reads_at_turn = None

        def turn(self):
            self.reads_at_turn = self.reads
            self.thermal_ns += 1_000_000  # a thermal slowdown while the turn is awaited

    monitor = WaitedMonitor()
    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0, target_noise=0.0, time_cap_s=30)
    tools = timing_module.Instruments(HostSampler(), monitor)
    result, raw = timing_module.measure_pair(
        lambda: None, lambda: None, torch.device("cpu"), settings, "small", 0, tools=tools, turn=monitor.turn
    )
    assert monitor.reads_at_turn == 1
    assert result.throttled_batches == 1 and raw["throttled_batches"][0]["after_samples"] == 0
    assert result.reference.samples == 8  # retaken


def test_a_throttled_batch_waits_for_the_slowdown_to_clear_before_it_is_retaken():
    slowed = (0x20, 0)  # sw_thermal_slowdown set: the readings during batches 1 and 2, and two while idle
    monitor = _ScriptedNvml([COOL, slowed, slowed, slowed, slowed])
    result, raw = _measure_with(monitor, cooldown_s=5.0)
    assert result.throttled_batches == 1 and result.reference.samples == 12
    assert 0.15 <= result.cooled_s < 5.0  # three polls of 50 ms, the last one cool
    assert monitor.reads == 1 + 2 + 3 + 6 + 1  # the cool reading that ended the wait opened the retaken batches


def test_the_next_batch_runs_while_the_last_one_is_read_and_judged():
    """The loop runs one batch ahead: the clocks are read after the next batch's launch, and a batch is
    judged by the readings before, during and after it, so a slowdown seen only while it ran counts."""
    calls: list[str] = []

    class _Logged(_ScriptedNvml):
        def read(self):
            calls.append("read")
            return super().read()

    monitor = _Logged([COOL, (0x20, 0)])  # set only while batch 1 runs
    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    settings = TimingSettings(min_samples=4, max_samples=4, batch=2, warmup_ms=0.0, target_noise=0.0, cooldown_s=0.06)
    import torch

    calling = lambda: calls.append("call")  # noqa: E731
    tools = timing_module.Instruments(HostSampler(), monitor)
    result, raw = timing_module.measure_pair(calling, calling, torch.device("cpu"), settings, "small", 0, tools=tools)
    warm = 6  # three warm-up calls per side
    batch = ["call"] * 4
    assert calls[warm:] == ["read", *batch, "read", *batch, "read", "read", *batch, "read", *batch, "read", "read"]
    assert raw["throttled_batches"] == [
        {"after_samples": 0, "why": "throttle: sw_thermal_slowdown", "next_discarded": True}
    ]
    assert result.reference.samples == 4


@pytest.mark.parametrize("wait_s", [0.0, 0.05])
def test_the_warm_up_runs_before_the_turn_and_the_samples_after_it(wait_s):
    """``turn`` is called once, between the warm-up's calls and the first batch's, and the timing window (what a
    result says was measured alone) starts after it. A turn that came long after the warm-up (the shared work it
    waited for ran between) gets one more round of both sides first."""
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    calls: list[str] = []
    taken: list[float] = []

    def turn():
        time.sleep(wait_s)
        calls.append("turn")
        taken.append(time.time())

    settings = TimingSettings(min_samples=4, max_samples=4, batch=2, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(HostSampler(), _ScriptedNvml([]))
    calling = lambda: calls.append("call")  # noqa: E731
    result, _ = timing_module.measure_pair(
        calling, calling, torch.device("cpu"), settings, "small", 0, tools=tools, turn=turn
    )
    # The wait as measured decides (0.05 s always rewarms): an immediate turn may still come late where the host took
    # this process off its core (a CI machine under load made 2 more calls on a wait of 0).
    assert result.turn_wait_s >= wait_s
    again = ["call"] * 2 if result.turn_wait_s > timing_module.REWARM_AFTER_S else []
    # three warm-up rounds, the turn, one more round after a long wait, two batches of two pairs
    assert calls == ["call"] * 6 + ["turn"] + again + ["call"] * 8
    assert result.window[0] >= taken[0]


@pytest.mark.parametrize("turn_given", [True, False])
def test_the_batches_are_sized_from_a_round_in_the_turn_not_from_a_warm_up_beside_shared_work(turn_given):
    """A warm-up whose round was slow (beside other evaluations' shared work, or first calls) would size the batches
    at ``batch`` pairs; one round in the turn, alone, sizes them instead, where shorter calls would get longer batches.
    Without a turn the warm-up had the device to itself, and sizes them as before."""
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    calls: list[str] = []

    def side():
        calls.append("call")
        if len(calls) <= 2:
            time.sleep(0.02)  # the warm-up's one round: 40 ms for the pair, over ``samplers.LONG_ROUND_MS``

    settings = TimingSettings(
        min_samples=4, max_samples=4096, batch=2, batch_min_ms=30.0, warmup_ms=0.0, target_noise=0.0
    )
    tools = timing_module.Instruments(HostSampler(), _ScriptedNvml([]))
    turn = (lambda: calls.append("turn")) if turn_given else None
    result, raw = timing_module.measure_pair(
        side, side, torch.device("cpu"), settings, "small", 0, tools=tools, turn=turn
    )
    if turn_given:
        assert calls[:5] == ["call", "call", "turn", "call", "call"]  # the warm-up, the turn, the sizing round
        assert result.batch_pairs > 2 * 2**3  # microsecond calls: far more pairs than the warm-up's 40 ms allowed
        # Both rounds in the record, the warm-up's slow one and the turn's that sized the batches.
        assert result.sizing_rounds_ms["warm_up"] >= 40.0 > 1.0 > result.sizing_rounds_ms["in_turn"]
    else:
        assert result.batch_pairs == 2  # 2 pairs of the warm-up's 40 ms last ``batch_min_ms``
        assert set(result.sizing_rounds_ms) == {"warm_up"} and result.sizing_rounds_ms["warm_up"] >= 40.0
    assert len(raw["order"]) == 2 * result.batch_pairs * len(raw["batch_window"])


@pytest.mark.parametrize("was_on", [True, False])
def test_no_collection_runs_while_a_pair_is_measured(was_on):
    """Python's cyclic collector is off from the warm-up to the last sample, whatever a side's calls make, and
    as it was after: a full collection over torch's stack held the host longer than a short batch's queued work
    (BENCHMARKS.md, twenty-ninth session)."""
    import gc

    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    seen: list[bool] = []
    collections: list[int] = []  # the collections made so far, at each call

    def side():
        seen.append(gc.isenabled())
        collections.append(sum(generation["collections"] for generation in gc.get_stats()))
        for _ in range(2000):  # cyclic garbage enough to pass generation 0's threshold many times over
            cycle: list = []
            cycle.append(cycle)

    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(HostSampler(), _ScriptedNvml([]))
    (gc.enable if was_on else gc.disable)()
    try:
        timing_module.measure_pair(
            side, side, torch.device("cpu"), settings, "small", 0, tools=tools, turn=lambda: None
        )
        assert gc.isenabled() is was_on
    finally:
        gc.enable()
    # The warm-up: three rounds of both sides where the first was short, one where it was not (samplers.LONG_ROUND_MS:
    # a loaded host, as CI's once was, makes these calls' first round long); then 8 pairs.
    assert len(seen) - 16 in (2, 6) and not any(seen)
    assert len(set(collections)) == 1, "a collection ran between the first call and the last"


@pytest.mark.parametrize(
    ("pair_ms", "pairs"), [(5.0, 20), (2.5, 20), (1.25, 40), (0.6, 160), (0.001, 1280), (0.0, 1280)]
)
def test_a_batch_holds_the_least_power_of_two_pairs_that_lasts_batch_min_ms(pair_ms, pairs):
    from runner.worker.protocol import TimingSettings
    from runner.worker.stopping import batch_pairs

    assert batch_pairs(TimingSettings(batch=20, batch_min_ms=50.0, max_samples=100_000), pair_ms) == pairs
    assert batch_pairs(TimingSettings(batch=20), pair_ms) == 20  # 0 (the default): ``batch`` pairs


def test_a_measurement_stopped_at_max_samples_still_has_batches_enough():
    """However short the calls, a batch holds at most ``max_samples / MIN_BATCHES_AT_CAP`` pairs (as a power of two
    times ``batch``): a measurement the sample cap stops keeps room for both sides' audits and every placement."""
    from runner.worker.protocol import TimingSettings
    from runner.worker.stopping import MIN_BATCHES_AT_CAP, batch_pairs

    settings = TimingSettings(batch=20, batch_min_ms=50.0, max_samples=5000)
    assert batch_pairs(settings, 0.001) == 160  # 250 allowed: 20, 40, 80, 160
    assert settings.max_samples // batch_pairs(settings, 0.001) >= MIN_BATCHES_AT_CAP
    assert batch_pairs(TimingSettings(batch=20, batch_min_ms=50.0, max_samples=100), 0.001) == 20


def test_short_calls_are_sampled_in_longer_batches():
    """Calls far shorter than ``batch_min_ms``: each batch holds the most pairs (``batch`` times
    2 ** MAX_BATCH_DOUBLINGS), every batch alike, and the result says how many."""
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings
    from runner.worker.stopping import MAX_BATCH_DOUBLINGS

    settings = TimingSettings(
        min_samples=4, max_samples=4096, batch=2, batch_min_ms=1000.0, warmup_ms=0.0, target_noise=0.0
    )
    tools = timing_module.Instruments(HostSampler(), _ScriptedNvml([]))
    result, raw = timing_module.measure_pair(
        lambda: None, lambda: None, torch.device("cpu"), settings, "small", 0, tools=tools
    )
    pairs = 2 * 2**MAX_BATCH_DOUBLINGS
    assert result.batch_pairs == pairs
    assert len(raw["order"]) == 2 * pairs * len(raw["batch_window"]) and len(raw["batch_window"]) >= 1
    assert result.reference.samples % pairs == 0


def test_no_batch_is_queued_behind_the_one_that_reaches_the_noise_target():
    """Running one batch ahead, the loop still stops where the rule holds: batch 2 of 4 pairs brings the
    count to min_samples (8) with the noise already under the target, so no batch 3 is queued behind it."""
    monitor = _ScriptedNvml([])
    result, raw = _measure_with(monitor, min_samples=8, max_samples=100, batch=4, target_noise=1e9)
    assert result.stop_reason == "noise_target"
    assert result.reference.samples == result.candidate.samples == 8 and len(raw["order"]) == 16
    assert monitor.reads == 1 + 2 + 1


def test_a_gpu_that_never_cools_is_the_gpus_failure_not_the_candidates():
    from runner.worker.timing import GpuThrottled

    always = _ScriptedNvml([(0x20, 0)] * 10_000)
    with pytest.raises(GpuThrottled, match="slowed in all 4 batches"):
        _measure_with(always, cooldown_s=0.06, max_throttled_batches=3)


def test_quartiles_read_off_sorted_samples_match_the_statistics_module():
    """The noise after each batch reads quartiles and median off samples kept sorted: the same
    numbers as ``statistics`` gives, to the last bit, at every count the loop reaches."""
    import random
    import statistics

    from runner.worker.median_noise import quartiles_of_sorted, ratio_noise, relative_median_error

    rng = random.Random(7)
    for count in [*range(2, 41), 999, 1000, 5000]:
        values = [rng.lognormvariate(0, 0.3) for _ in range(count)]
        q1, _, q3 = statistics.quantiles(values, n=4)
        assert quartiles_of_sorted(sorted(values)) == (q1, statistics.median(values), q3)
        if count >= 4:
            assert relative_median_error(sorted(values), presorted=True) == relative_median_error(values)
    other = [rng.random() for _ in range(100)]
    assert ratio_noise(sorted(values), sorted(other), presorted=True) == ratio_noise(values, other)


def test_a_measurement_the_gpu_spoiled_ends_infra_error_not_the_candidates_runtime_error(monkeypatch, tmp_path):
    """The whole evaluation, in this process, with NVML's test double always showing a thermal slowdown."""
    from runner.worker import timing as timing_module
    from runner.worker.evaluate import evaluate
    from runner.worker.protocol import TimingSettings

    always = _ScriptedNvml([(0x20, 0)] * 10_000)
    monkeypatch.setattr(timing_module, "ClockMonitor", lambda uuid: always)
    settings = TimingSettings(batch=2, warmup_ms=0.0, cooldown_s=0.06, max_throttled_batches=2)
    result = evaluate(_scale_job(tmp_path, settings), tmp_path)
    assert (result.verdict.status, result.verdict.reason) == ("infra_error", "gpu_throttled"), result.verdict
    assert "slowed in all 3 batches" in result.verdict.message
    assert [trial.ok for trial in result.trials] == [True, True]  # correctness had passed


def _scale_job(tmp_path, settings) -> dict:
    """A job of ``DOUBLING_TASK`` against itself, for ``evaluate`` in this process (its files in ``tmp_path``)."""
    candidate = DOUBLING_TASK.replace("class Model(", "class ModelNew(")
    return in_process_job(
        tmp_path, DOUBLING_TASK, candidate, "scale", {"small": {"n": 64}, "perf": {"n": 256}}, settings
    )


def test_the_samples_file_is_written_when_the_checks_after_timing_fail(monkeypatch, tmp_path):
    """Written once the token is let go, the samples still land when a check after timing stops the evaluation."""
    from runner.worker import evaluate as evaluate_module
    from runner.worker import timed_stage
    from runner.worker.protocol import SAMPLES_FILE, TimingSettings

    monkeypatch.setattr(timed_stage, "unjoined_work", lambda gaps, median_ms, recheck: "work left on another stream")
    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0)
    result = evaluate_module.evaluate(_scale_job(tmp_path, settings), tmp_path)
    assert (result.verdict.status, result.verdict.reason) == ("integrity_violation", "unjoined_stream_work")
    assert len(json.loads((tmp_path / "out" / SAMPLES_FILE).read_text())["candidate"]) == 8


_FAILS_ON_ITS_THIRD_CALL = """
import torch
import torch.nn as nn

calls = 0

class ModelNew(nn.Module):
    def forward(self, x):
        global calls
        calls += 1
        if calls == 3:  # two checked calls (two trials of one shape); the third is the warm-up's first
            raise RuntimeError("failed in the warm-up")
        return x * 2.0
"""


def test_a_candidate_failing_in_its_warm_up_leaves_the_token_and_turnstile_free(monkeypatch, tmp_path):
    """The warm-up runs holding the turnstile and the token shared (``DeviceToken.approach``, real flocks here):
    a candidate raising there is its runtime error, and both locks are free afterwards for the next one."""
    import fcntl
    import os

    from runner.worker import evaluate as evaluate_module
    from runner.worker.device_token import TOKEN_ENV, create_token_files, turnstile_of
    from runner.worker.protocol import SAMPLES_FILE, TimingSettings

    token = create_token_files(tmp_path / "gpu-0.work")
    monkeypatch.setenv(TOKEN_ENV, str(token))
    job = _scale_job(tmp_path, TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0))
    (tmp_path / "candidate.py").write_text(_FAILS_ON_ITS_THIRD_CALL)
    result = evaluate_module.evaluate(job, tmp_path)
    assert (result.verdict.status, result.verdict.reason, result.verdict.stage) == (
        "runtime_error", "timing_failed", "timing"
    )  # fmt: skip
    assert "failed in the warm-up" in result.verdict.message
    modes = [mode for _, _, mode in result.environment["device_token"]["windows"]]
    assert modes == ["shared", "shared"]  # set-up and checks; the approach, given up
    for path in (token, turnstile_of(token)):
        descriptor = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises where anything is still held
        finally:
            os.close(descriptor)
    assert not (tmp_path / "out" / SAMPLES_FILE).exists()


def test_the_measurements_set_up_and_its_samples_file_stay_out_of_the_turn(monkeypatch, tmp_path):
    """The sampler and the clock monitor (NVML's handle; on a GPU the L2 flush buffer) are set up while the
    evaluation holds the token shared: their set-up took 3.5 s of the fifteenth session's turns. The raw
    samples are written once the token is let go: the next measurement waits for the checks after timing."""
    from runner.worker import evaluate as evaluate_module
    from runner.worker import timed_stage
    from runner.worker.device_token import EXCLUSIVE, DeviceToken
    from runner.worker.protocol import SAMPLES_FILE, TimingSettings

    log: list[str] = []
    build, hold, approach, close, write = (
        timed_stage.instruments, DeviceToken.hold, DeviceToken.approach, DeviceToken.close,
        evaluate_module.write_json_atomic,
    )  # fmt: skip
    monkeypatch.setattr(timed_stage, "instruments", lambda *a: log.append("instruments") or build(*a))
    monkeypatch.setattr(DeviceToken, "hold", lambda self, mode: log.append(mode) or hold(self, mode))
    monkeypatch.setattr(DeviceToken, "approach", lambda self: log.append("approach") or approach(self))
    monkeypatch.setattr(DeviceToken, "close", lambda self: log.append("let go") or close(self))
    monkeypatch.setattr(
        evaluate_module, "write_json_atomic", lambda path, data: log.append(path.name) or write(path, data)
    )
    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0)
    result = evaluate_module.evaluate(_scale_job(tmp_path, settings), tmp_path)
    assert result.verdict.status == "correct" and result.timing.clocks_watched == "not a CUDA device"
    assert result.timing.flush_bytes is None  # the host clock flushes nothing
    steps = ("instruments", "approach", EXCLUSIVE, "let go", SAMPLES_FILE)
    assert [log.count(step) for step in steps] == [1] * len(steps)
    assert [log.index(step) for step in steps] == sorted(log.index(step) for step in steps)
    assert len(json.loads((tmp_path / "out" / SAMPLES_FILE).read_text())["reference"]) == 8


@pytest.mark.parametrize("call_ms, rounds", [(2.0, 1), (0.0, 3)])  # calls of 0 ms: microseconds, however loaded
def test_the_warm_up_runs_both_sides_in_turn_and_shares_its_time(call_ms, rounds):
    """One round of the two sides, two more in one batch (one synchronisation) where it was shorter than
    ``LONG_ROUND_MS``, then both in turn until ``warmup_ms`` has run in all: the sides share it (it was
    ``warmup_ms`` per side: about twice the warm-up for nothing it settles)."""
    from runner.worker.samplers import LONG_ROUND_MS, warm_up

    calls: list[str] = []
    batches: list[int] = []

    class CountingSampler(HostSampler):
        def launch(self, fns, labels=None):
            batches.append(len(fns))
            return super().launch(fns, labels)

    def side(name: str):
        def call():
            calls.append(name)
            time.sleep(call_ms / 1000.0)

        return call

    assert (2 * call_ms >= LONG_ROUND_MS) == (rounds == 1)
    shortest = warm_up([side("r"), side("c")], CountingSampler(), warmup_ms=0.0)
    assert calls == ["r", "c"] * rounds and batches == [2] + [4] * (rounds == 3)
    assert shortest >= 2 * call_ms
    calls.clear()
    batches.clear()
    warm_up([side("r"), side("c")], CountingSampler(), warmup_ms=40.0)
    assert batches[0] == 2 and len(batches) >= 2 and sum(batches) == len(calls)
    assert calls == ["r", "c"] * (len(calls) // 2)
    if call_ms == 2.0:  # 2 ms a call or more: 40 ms of both sides is at most 10 rounds; per side, 20 calls each
        assert 2 <= len(calls) // 2 <= 10


class _AuditingHostSampler:
    """``CudaSampler``'s interface on the host clock, audit calls included (test double at the GPU boundary:
    no GPU here). ``slowed`` picks the audits (by their order, from 0) that something else slows by 30 ms,
    as on the H100; a call marked ``leaves_work`` is slowed in every audit, as work left on another stream
    would be."""

    clock = "host_perf_counter"
    flushes = False
    flush_bytes = None
    queues_ahead = False  # each batch runs as it is launched
    slowed: frozenset = frozenset()

    def __init__(self) -> None:
        self._host = HostSampler()
        self._audits = 0

    def launch(self, fns, labels=None) -> dict:
        return {**self._host.launch(fns, labels), "audit": None, "called": None}

    def close(self, handle: dict, audit=None) -> None:
        if audit is not None:
            handle["audit"] = handle["called"] = self._host.launch([audit])["times"][0]
            if self._audits in self.slowed or getattr(audit, "leaves_work", False):
                handle["audit"] += 30.0
            self._audits += 1

    def times(self, handle: dict):
        return handle["times"], handle["audit"]

    def led(self, handle: dict) -> tuple[list[int], float]:
        """No leads on the host clock."""
        return [], 0.0

    def audit_sample(self, handle: dict):
        """The audited call's own time, as the events around it on a GPU would have it: what slows the audit's
        synchronisation is not in it."""
        return handle["called"]

    def span(self, handle: dict) -> float:
        return handle["span"]

    def gap_before(self, handle: dict) -> None:
        return None

    def queued_behind(self, handle: dict) -> bool:
        return False

    def forget_last(self) -> None:
        """Nothing kept between batches."""


def _measure_audited(sampler, seed=7, candidate=None, **overrides):
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    options = dict(min_samples=200, max_samples=200, batch=5, warmup_ms=0.0, target_noise=0.0)
    settings = TimingSettings(**{**options, **overrides})
    candidate = candidate or (lambda: None)
    tools = timing_module.Instruments(sampler(), timing_module.ClockMonitor(None))  # no NVML: none watched
    return timing_module.measure_pair(
        lambda: None, candidate, torch.device("cuda"), settings, "small", seed, tools=tools
    )


@pytest.mark.parametrize("share", [0.25, 1.0])
def test_audits_three_per_side_then_the_share_drawn_from_the_seed(share):
    """Three audits of each side first, then later batches by the seed's draws (every batch with 1), which
    leave the interleaved order as the seed made it."""
    from runner.worker.sync_audits import MIN_AUDITS

    timing, raw = _measure_audited(_AuditingHostSampler, audit_share=share)
    batches = 200 // 5
    audits = {side: len(values) for side, values in raw["sync_audit"].items()}
    assert min(audits.values()) >= MIN_AUDITS
    assert abs(audits["reference"] - audits["candidate"]) <= 1  # the sides alternate
    if share == 1.0:
        assert sum(audits.values()) == batches
    else:
        assert 2 * MIN_AUDITS < sum(audits.values()) < batches / 2
        again = _measure_audited(_AuditingHostSampler, audit_share=share)[1]
        assert {side: len(v) for side, v in again["sync_audit"].items()} == audits  # the seed decides
    audited_always = _measure_audited(_AuditingHostSampler, audit_share=1.0)[1]
    assert raw["order"] == audited_always["order"]
    assert timing.sync_gap_ms.keys() == {"reference", "candidate"}


@pytest.mark.parametrize("which", [0, 1])
def test_one_slowed_audit_is_no_evidence_but_work_left_in_every_audit_is(which):
    """H100, a reference timed against itself: one audit of 28.2 ms for a 3.5 ms call was the candidate
    side's only one, and flagged it ``unjoined_stream_work``. A side's first audit slowed (either side) now
    moves no median; a call slowed in every audit is still flagged."""

    class OneSlowed(_AuditingHostSampler):
        slowed = frozenset({which})

    timing, raw = _measure_audited(OneSlowed, audit_share=0.25, min_samples=40, max_samples=40)
    assert sum(audit > 30.0 for values in raw["sync_audit"].values() for audit in values) == 1
    assert unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms) is None

    def leaves_work():
        return None

    leaves_work.leaves_work = True
    timing, _ = _measure_audited(_AuditingHostSampler, candidate=leaves_work, audit_share=0.25)
    assert "work on another stream was not timed" in unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms)


class _RecordingAuditor(_AuditingHostSampler):
    """``_AuditingHostSampler`` that keeps every batch's sample times and every audited call, in order; a call
    marked ``disturbed_while_measured`` has each of its audits among the first ``measured_audits`` slowed by
    3 ms, as other processes making CUDA contexts slowed one side's audits on the H100, and none after."""

    measured_audits = 8  # min_samples = max_samples = 40 in batches of 5, every batch audited

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[float]] = []
        self.audited: list = []

    def launch(self, fns, labels=None) -> dict:
        handle = super().launch(fns, labels)
        self.batches.append(handle["times"])
        return handle

    def close(self, handle: dict, audit=None) -> None:
        disturbed = self._audits < self.measured_audits and getattr(audit, "disturbed_while_measured", False)
        super().close(handle, audit)
        if audit is not None:
            self.audited.append(audit)
            handle["audit"] += 3.0 * disturbed


def _measure_rechecked(candidate):
    """``candidate`` against a reference of its own on ``_RecordingAuditor``: 8 batches, each audited."""
    sampler = _RecordingAuditor()
    timing, raw = _measure_audited(
        lambda: sampler, candidate=candidate, audit_share=1.0, min_samples=40, max_samples=40
    )
    return timing, raw, sampler


def test_audits_disturbed_while_measuring_are_taken_again_and_the_fresh_ones_judged():
    """H100, a reference against itself while other processes made CUDA contexts: the candidate's audits were
    slowed (median 3.60 ms for a 0.715 ms call, the reference's 1.33), its gap's excess 2.28 ms, flagged. Five fresh audits per side,
    the sides alternating, are judged instead; the first gaps stay on record, the samples as measured."""
    from runner.worker.sync_audits import RECHECK_AUDITS

    def candidate():
        return None

    candidate.disturbed_while_measured = True
    timing, raw, sampler = _measure_rechecked(candidate)
    recheck = timing.audit_recheck
    assert recheck is not None and "work on another stream was not timed" in recheck["why"]
    assert recheck["first_gap_ms"]["candidate"] > 2.9 and recheck["audits_per_side"] == RECHECK_AUDITS
    assert {side: len(values) for side, values in raw["sync_audit"].items()} == {"reference": 4, "candidate": 4}
    assert {side: len(values) for side, values in raw["sync_audit_recheck"].items()} == {
        "reference": RECHECK_AUDITS, "candidate": RECHECK_AUDITS
    }  # fmt: skip
    assert timing.sync_gap_ms["candidate"] < 1.0
    assert unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, recheck) is None
    fresh = sampler.audited[-2 * RECHECK_AUDITS :]
    first, second = fresh[:2]  # the sides alternate, from either
    assert first is not second and candidate in (first, second)
    assert fresh == [first, second] * RECHECK_AUDITS
    # The recheck's batches (made as the measured ones: 5 pairs) come last and are not samples: the 8 measured are.
    measured, rechecks = sampler.batches[-8 - 2 * RECHECK_AUDITS : -2 * RECHECK_AUDITS], sampler.batches[-10:]
    assert all(len(batch) == 10 for batch in rechecks)
    by_side = {"reference": [], "candidate": []}
    for side, elapsed in zip(raw["order"], [t for batch in measured for t in batch]):
        by_side[side].append(elapsed)
    assert by_side == {"reference": raw["reference"], "candidate": raw["candidate"]}
    # Each side's summary also counts its 4 audited calls, kept as samples apart from the batches'.
    assert {side: len(values) for side, values in raw["audit_samples"].items()} == {"reference": 4, "candidate": 4}
    assert timing.reference.samples == timing.candidate.samples == 44 and timing.audit_samples == 8


def test_audited_calls_are_samples_of_their_side_and_what_slows_their_synchronisation_is_not():
    """H100, a full suite: 3.7 s of the 4.2 s of audits were the audited calls themselves, left out of every
    side's samples. Each audited call, timed between its own events, now counts in its side's median, noise and
    measured time, kept apart in ``samples.json`` with its batch and clock; the audit's own time, which a slowed
    synchronisation lengthens, is judged as before and never a sample."""
    import statistics

    class OneSlowed(_AuditingHostSampler):
        slowed = frozenset({0})

    timing, raw = _measure_audited(OneSlowed, audit_share=0.25, min_samples=40, max_samples=40)
    kept = raw["audit_samples"]
    assert {side: len(values) for side, values in kept.items()} == {
        side: len(values) for side, values in raw["sync_audit"].items()
    }  # fmt: skip
    assert timing.audit_samples == sum(len(values) for values in kept.values()) >= 6
    assert max(value for values in kept.values() for value in values) < 30.0  # the slowed audit's call is not slowed
    batches = len(raw["batch_window"])
    for side in kept:
        assert len(raw[side]) == 40  # the batches keep their pairs: 8 batches of 5
        assert raw["audit_sample_batch"][side] == sorted(raw["audit_sample_batch"][side])
        assert all(0 <= index < batches for index in raw["audit_sample_batch"][side])
        assert raw["audit_sample_clock_mhz"][side] == [None] * len(kept[side])  # no NVML here: no clock read
        summary = getattr(timing, side)
        assert summary.samples == 40 + len(kept[side])
        assert summary.median_ms == statistics.median(raw[side] + kept[side])
    every = [value for side in kept for value in raw[side] + kept[side]]
    assert timing.measured_s == pytest.approx(sum(every) / 1000.0)


def test_work_left_on_another_stream_is_flagged_again_by_the_recheck():
    """Hidden work lengthens every audit, the fresh ones too: still flagged, and the evidence says so."""

    def leaves_work():
        return None

    leaves_work.leaves_work = True
    timing, raw, _ = _measure_rechecked(leaves_work)
    assert timing.audit_recheck is not None and min(raw["sync_audit_recheck"]["candidate"]) > 30.0
    evidence = unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, timing.audit_recheck)
    assert "work on another stream was not timed" in evidence
    assert "the audits were taken twice: a recheck of 5 audits per side confirmed" in evidence


def test_no_recheck_where_the_measurements_audits_show_nothing():
    """Quiet audits judged as they are: no audit beyond the measured batches', none recorded as a recheck."""
    import statistics

    timing, raw, sampler = _measure_rechecked(lambda: None)
    assert timing.audit_recheck is None and raw["sync_audit_recheck"] == {"reference": [], "candidate": []}
    assert len(sampler.audited) == _RecordingAuditor.measured_audits
    assert timing.sync_gap_ms == {
        side: statistics.median(raw["sync_audit"][side]) - statistics.median(raw[side] + raw["audit_samples"][side])
        for side in raw["sync_audit"]
    }  # each side's median, its audited calls kept as samples included


class _SideStreamSampler(_AuditingHostSampler):
    """Test double at the GPU boundary (no GPU here): work a call leaves on a side stream piles up until a
    device-wide synchronisation, which an audit call's close is, waits for all of it; ``syncs`` counts those,
    which is what a candidate can learn from querying an event of its own (``torch.cuda.Event.query``)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0
        self.left_ms = 0.0

    def close(self, handle: dict, audit=None) -> None:
        if audit is not None:
            handle["audit"] = self._host.launch([audit])["times"][0] + self.left_ms
            self.left_ms, self.syncs = 0.0, self.syncs + 1


def test_a_candidate_honest_only_after_a_synchronisation_is_flagged_by_the_recheck():
    """A reviewer's model: a candidate that hides 10 ms on a side stream in every call but the first two after
    a device-wide synchronisation. A recheck of its own shape (one call per batch, each after a synchronisation)
    cleared it; batches made as the measured ones do not."""
    sampler = _SideStreamSampler()
    seen = {"syncs": -1, "calls": 0}

    def cheat():
        if sampler.syncs != seen["syncs"]:
            seen.update(syncs=sampler.syncs, calls=0)
        seen["calls"] += 1
        if seen["calls"] > 2:
            sampler.left_ms += 10.0

    timing, raw = _measure_audited(lambda: sampler, candidate=cheat, min_samples=200, max_samples=200, batch=20)
    assert timing.audit_recheck is not None  # the measurement's own audits showed it
    evidence = unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, timing.audit_recheck)
    assert evidence and "the audits were taken twice" in evidence
    assert min(raw["sync_audit_recheck"]["candidate"]) > 9.0


def test_a_sides_lead_is_its_host_time_at_most_its_gpu_time_and_none_before_it_has_both():
    """``QueueLead``: a side's sample needs as much work queued ahead of it (else it is led by the difference) as its
    host takes to queue a call, the median of its last calls, but never more than its call runs on the GPU nor
    ``LEAD_MAX_MS``; a side without times of both kinds, or a call of no side, gets none."""
    from runner.worker.queue_lead import LEAD_HISTORY, LEAD_MAX_MS, QueueLead

    leads = QueueLead()
    assert leads.lead_ms("candidate") == 0.0
    for host_ms in (0.9, 1.0, 1.1):
        leads.add("candidate", host_ms=host_ms)
    assert leads.lead_ms("candidate") == 0.0  # no GPU time yet
    leads.add("candidate", gpu_ms=2.0)
    assert leads.lead_ms("candidate") == pytest.approx(1.0)
    leads.add("reference", host_ms=7.5)  # a call that waited for the device: its host time is its GPU time or more
    leads.add("reference", gpu_ms=3.8)
    assert leads.lead_ms("reference") == pytest.approx(3.8)
    leads.add("long", host_ms=40.0)
    leads.add("long", gpu_ms=30.0)
    assert leads.lead_ms("long") == LEAD_MAX_MS
    for _ in range(LEAD_HISTORY):  # the last calls only: a first call that compiled is forgotten
        leads.add("candidate", host_ms=0.2)
    assert leads.lead_ms("candidate") == pytest.approx(0.2)
    leads.add(None, host_ms=1.0, gpu_ms=1.0)
    assert leads.lead_ms(None) == 0.0


def test_a_measurement_on_the_host_clock_leads_nothing_and_says_so():
    """The host clock runs each call as it is launched: no sample is led, each kept batch lists none
    (``samples.json``'s ``batch_led``), and the result says the sampler does not lead (None, not zero)."""
    import torch

    from runner.worker import timing as timing_module
    from runner.worker.protocol import TimingSettings

    settings = TimingSettings(min_samples=8, max_samples=8, batch=2, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(HostSampler(), ClockMonitor(None))
    result, raw = timing_module.measure_pair(
        lambda: None, lambda: None, torch.device("cpu"), settings, "small", 0, tools=tools
    )
    assert raw["batch_led"] == [[] for _ in raw["batch_placement"]] and len(raw["batch_led"]) == 4
    assert raw["batch_lead_ms"] == [0.0] * 4
    assert result.led_samples is None and result.lead_ms is None


def test_each_sides_sync_gap_is_the_larger_of_its_audits_after_a_synchronisation_and_behind_a_chain():
    """The audits of one side come in two shapes (``sync_audits.sync_gaps``): after a synchronisation (chain 0) and behind
    a chain of batches queued behind one another. Each shape's median is judged apart and the larger counts: three
    clean audits after a synchronisation and two of 5 ms behind a chain give a gap of 4 ms, where the pooled median
    would have given none."""
    from runner.worker.sync_audits import sync_gaps

    audits = {"reference": [1.0, 1.0, 1.1], "candidate": [1.0, 1.0, 1.0, 5.0, 5.0]}
    chains = {"reference": [0, 0, 2], "candidate": [0, 0, 0, 1, 3]}
    gaps = sync_gaps(audits, chains, {"reference": 1.0, "candidate": 1.0})
    assert gaps == pytest.approx({"reference": 0.1, "candidate": 4.0})
    assert sync_gaps(
        {"reference": [], "candidate": [2.0]}, {"reference": [], "candidate": [0]}, {"candidate": 1.0}
    ) == {"candidate": 1.0}
