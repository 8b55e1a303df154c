"""Placements: the timed call at several sets of addresses, sampled in turn within one measurement.

The timing loop on the host clock with closures that log which placement ran (the GPU runs the same
loop in tests/test_gpu.py); the worker's input sets and held outputs on CPU tensors.
"""

from __future__ import annotations

import math
import statistics
import types

import pytest
import torch

from runner.worker import placements
from runner.worker.protocol import TimingSettings
from runner.worker.timing import _placement_spread, measure_pair

CPU = torch.device("cpu")


def _logged_placements(count: int, log: list):
    return [lambda k=k: log.append(k) for k in range(count)]


def test_batches_take_the_placements_in_turn_and_the_target_waits_for_all_of_them():
    # The noise target and the sample minimum hold after the first batch; with four placements the
    # sampling may stop only once each has had a batch, and the stop prediction queues none beyond.
    settings = TimingSettings(min_samples=2, max_samples=100, batch=2, warmup_ms=0.0, target_noise=1e9, time_cap_s=30)
    log: list[int] = []
    timing, raw = measure_pair(_logged_placements(4, log), _logged_placements(4, log), CPU, settings, "small", 0)
    assert timing.stop_reason == "noise_target" and timing.placements == 4
    assert raw["batch_placement"] == [0, 1, 2, 3] and timing.reference.samples == 8
    warm = 6  # three warm-up calls per side, on the first placement
    assert log[:warm] == [0] * warm
    assert log[warm:] == [k for k in range(4) for _ in range(4)]  # each batch: 2 pairs of its own placement
    assert timing.placement_spread is not None and timing.placement_noise is not None
    # Each kept batch's window: launched, then closed, and the next launched after it (runner/analysis/disturbances.py).
    windows = raw["batch_window"]
    assert len(windows) == 4 and all(start <= end for start, end in windows)
    assert all(windows[k][1] <= windows[k + 1][0] for k in range(3))


def test_one_closure_per_side_is_one_placement_with_no_spread():
    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0, target_noise=1e9)
    timing, raw = measure_pair(lambda: None, lambda: None, CPU, settings, "small", 0)
    assert timing.placements == 1 and set(raw["batch_placement"]) == {0}
    assert timing.placement_spread is None and timing.placement_noise is None


def test_both_sides_need_the_same_placements():
    settings = TimingSettings(min_samples=4, max_samples=8, batch=2, warmup_ms=0.0)
    with pytest.raises(ValueError, match="2 reference and 3 candidate placements"):
        measure_pair([print, print], [print] * 3, CPU, settings, "small", 0)


def test_placement_spread_from_each_placements_batches():
    # Three batches of 2 samples per placement; placement 1 runs the candidate 10% slower.
    placed = [0, 1, 0, 1, 0, 1]
    samples = {"reference": [2.0] * 12, "candidate": [1.0, 1.0, 1.1, 1.1] * 3}
    spread, noise = _placement_spread(samples, placed, batch=2)
    speedups = [2.0, 2.0 / 1.1]
    assert spread == pytest.approx(1.1 - 1)
    assert noise == pytest.approx(statistics.stdev(speedups) / math.sqrt(2) / statistics.fmean(speedups))
    assert _placement_spread(samples, [0] * 6, batch=2) == (None, None)
    # One batch slowed (something else on the GPU) is one of its placement's three: the placement's
    # speedup is the median of its batches' speedups, unmoved.
    samples["reference"][0:2] = [2.5, 2.5]
    assert _placement_spread(samples, placed, batch=2)[0] == pytest.approx(spread)


class _Task:
    """A task module's ``get_inputs``: one float32 tensor of ``n`` elements (4 n bytes)."""

    def __init__(self, n: int) -> None:
        self.module = types.SimpleNamespace(get_inputs=lambda: [torch.randn(n)])


@pytest.mark.parametrize(
    ("affordable_sets", "groups"),
    [
        (100, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]),  # four placements of three sets
        (8, [[0, 1], [2, 3], [4, 5], [6, 7]]),  # fewer sets per placement before fewer placements
        (3, [[0], [1], [2]]),  # one set each, then fewer placements
        (1, [[0]]),
    ],
)
def test_input_sets_under_the_budget_keep_placements_first(monkeypatch, affordable_sets, groups):
    monkeypatch.setattr(placements, "TIMING_INPUT_BUDGET_BYTES", affordable_sets * 4 * 1000)
    settings = TimingSettings(input_sets=3, placements=4)
    sets, found = placements.timing_inputs(_Task(1000).module, {}, CPU, 7, settings)
    assert found == groups and len(sets) == sum(map(len, groups))
    assert len({s[0].data_ptr() for s in sets}) == len(sets)  # all held at once: each at addresses of its own
    if len(sets) > 1:
        assert not torch.equal(sets[0][0], sets[1][0])  # each set from a seed of its own


def test_a_sides_rotations_take_their_groups_sets_and_keep_the_last_outputs_alive():
    inputs = [[torch.full((4,), float(k))] for k in range(6)]
    side = placements.TimedSide(lambda x: x * 2, inputs)
    first, second = side.rotation([0, 1, 2]), side.rotation([3, 4, 5])
    used = []
    for call in (first, first, second, first, second):
        output = call()
        used.append(side.last[0])
        assert torch.equal(output, inputs[side.last[0]][0] * 2) and side.last[1] is output
    assert used == [0, 1, 3, 2, 4]
    # The outputs of the last three calls are alive together, so each call's output lay at an address
    # other than those of the calls just before it.
    held = list(side.recent)
    assert len(held) == 3 and len({t.data_ptr() for t in held}) == 3


def test_outputs_larger_than_the_budget_are_not_held(monkeypatch):
    monkeypatch.setattr(placements, "TIMING_INPUT_BUDGET_BYTES", 4 * 4)  # one output of 4 floats
    side = placements.TimedSide(lambda x: x + 1, [[torch.zeros(4)] for _ in range(3)])
    rotation = side.rotation([0, 1, 2])
    for _ in range(5):
        rotation()
    assert side.recent.maxlen == 1
