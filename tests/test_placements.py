"""Placements: the timed call at several sets of addresses, sampled in turn within one measurement.

The timing loop on the host clock with closures that log which placement ran (the GPU runs the same
loop in tests/test_gpu.py); the worker's input sets and held outputs on CPU tensors.
"""

from __future__ import annotations

import math
import statistics
import time
import types

import pytest
import torch

from runner.worker import placements
from runner.worker.placement_judge import placement_spread, placements_wanted
from runner.worker.protocol import TimingSettings
from runner.worker.timing import measure_pair
from tests.conftest import in_process_job

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
    spread, noise = placement_spread(samples, placed, batch=2)
    speedups = [2.0, 2.0 / 1.1]
    assert spread == pytest.approx(1.1 - 1)
    assert noise == pytest.approx(statistics.stdev(speedups) / math.sqrt(2) / statistics.fmean(speedups))
    assert placement_spread(samples, [0] * 6, batch=2) == (None, None)
    # One batch slowed (something else on the GPU) is one of its placement's three: the placement's
    # speedup is the median of its batches' speedups, unmoved.
    samples["reference"][0:2] = [2.5, 2.5]
    assert placement_spread(samples, placed, batch=2)[0] == pytest.approx(spread)


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
    side = placements.TimedSide([lambda x: x * 2], inputs)
    first, second = side.rotation([0, 1, 2], 0), side.rotation([3, 4, 5], 1)
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
    side = placements.TimedSide([lambda x: x + 1], [[torch.zeros(4)] for _ in range(3)])
    rotation = side.rotation([0, 1, 2])
    for _ in range(5):
        rotation()
    assert side.recent.maxlen == 1


class _Weighted(torch.nn.Module):
    """A layer with weights (seeded like ``build_model`` seeds) and a buffer."""

    def __init__(self, size: int = 64) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(size, size)
        self.register_buffer("scale", torch.full((size,), 2.0))

    def forward(self, x):
        return self.linear(x) * self.scale


def _seeded(seed: int = 5):
    torch.manual_seed(seed)
    return _Weighted()


def test_each_placement_gets_a_copy_of_both_sides_weights_at_addresses_of_its_own():
    references, candidates = placements.weight_copies(_seeded, _seeded, 4)
    assert len(references) == len(candidates) == 4
    first = dict(references[0].state_dict())
    for copy in references[1:] + candidates:
        for name, tensor in copy.state_dict().items():
            assert torch.equal(tensor, first[name]), name  # the same constructor and seed: the same weights
    addresses = {t.data_ptr() for copy in references + candidates for t in copy.state_dict().values()}
    assert len(addresses) == 8 * len(first)  # each copy's every tensor at an address of its own, all alive


class _Wider(_Weighted):
    def __init__(self) -> None:
        super().__init__(128)  # four times _Weighted's weights, near enough


def test_weight_copies_stop_at_the_budget_of_the_heavier_side_and_both_sides_take_the_same_count(monkeypatch):
    size = placements.weight_bytes(_seeded())
    assert size == (64 * 64 + 64 + 64) * 4  # weight, bias and the buffer, float32
    monkeypatch.setattr(placements, "WEIGHT_COPIES_BUDGET_BYTES", 2 * size + 1)
    assert [len(side) for side in placements.weight_copies(_seeded, _seeded, 4)] == [2, 2]
    monkeypatch.setattr(placements, "WEIGHT_COPIES_BUDGET_BYTES", 3 * placements.weight_bytes(_Wider()))
    # A candidate heavier than the reference: its budget bounds both sides (three copies, not four).
    assert [len(side) for side in placements.weight_copies(_seeded, _Wider, 4)] == [3, 3]
    monkeypatch.setattr(placements, "WEIGHT_COPIES_BUDGET_BYTES", size - 1)
    # One copy is always made, whatever it weighs.
    assert [len(side) for side in placements.weight_copies(_seeded, _seeded, 4)] == [1, 1]


def test_a_side_holding_no_weights_does_not_limit_the_other_and_shared_storages_count_once():
    def bare():
        return lambda x: x  # no module: no weights of its own to place

    assert [len(side) for side in placements.weight_copies(_seeded, bare, 4)] == [4, 4]
    assert [len(side) for side in placements.weight_copies(bare, bare, 4)] == [1, 1]
    tied = _Weighted()
    tied.other = torch.nn.Linear(64, 64)
    tied.other.weight = tied.linear.weight  # tied weights: one storage
    assert placements.weight_bytes(tied) == placements.weight_bytes(_Weighted()) + 64 * 4


def test_each_rotation_calls_its_placements_copy_and_the_last_call_names_it():
    copies = [_seeded() for _ in range(2)]
    calls = []
    for k, copy in enumerate(copies):
        copy.register_forward_hook(lambda module, args, out, k=k: calls.append(k))
    side = placements.TimedSide(copies, [[torch.ones(3, 64)] for _ in range(4)])
    rotations = [side.rotation([0, 1], 0), side.rotation([2, 3], 1), side.rotation([0, 1], 2)]
    for rotation in (rotations[0], rotations[1], rotations[2], rotations[1]):
        rotation()
    assert calls == [0, 1, 0, 1]  # placement 2 of two copies: the first again
    index, output, model = side.last
    assert index == 3 and model is copies[1] and torch.equal(output, copies[1](side.input_sets[3][0]))


_LINEAR_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return self.linear(x)

def get_inputs(rows, n):
    return [torch.randn(rows, n)]

def get_init_inputs(n):
    return [n]
"""

# Honest on the checked shapes; on the timed shape each instance answers an input it has seen from a cache
# keyed by the input's address. Only the copy that saw that input set in the timing holds its stale answer.
_CACHED_BY_ADDRESS = _LINEAR_TASK.replace("class Model(", "class ModelNew(").replace(
    """    def forward(self, x):
        return self.linear(x)""",
    """    def forward(self, x):
        if x.shape[0] != 48:
            return self.linear(x)
        cache = self.__dict__.setdefault("answers", {})
        if x.data_ptr() not in cache:
            cache[x.data_ptr()] = self.linear(x)
        return cache[x.data_ptr()]""",
)


def _linear_job(tmp_path, candidate: str, placements_count: int, perf_rows: int = 48, **timing) -> dict:
    fields = dict(min_samples=4, max_samples=24, batch=2, warmup_ms=0.0, max_placements=placements_count)
    settings = TimingSettings(**{**fields, **timing, "placements": placements_count})
    shapes = {"small": {"rows": 4, "n": 16}, "perf": {"rows": perf_rows, "n": 16}}
    return in_process_job(tmp_path, _LINEAR_TASK, candidate, "linear", shapes, settings)


def test_the_worker_times_each_placement_on_its_own_copy_of_the_weights(tmp_path):
    from runner.worker.evaluate import evaluate

    honest = _LINEAR_TASK.replace("class Model(", "class ModelNew(")
    result = evaluate(_linear_job(tmp_path, honest, 3), tmp_path)
    assert result.verdict.status == "correct", result.verdict
    assert result.timing.placements == 3 and result.timing.weight_copies == 3


def test_an_answer_cached_by_address_in_the_last_calls_copy_is_caught_after_the_timing(tmp_path):
    # The call on new values at the same addresses goes to the copy that made the last timed call: another
    # copy never saw that input set and would answer it honestly.
    from runner.worker.evaluate import evaluate

    result = evaluate(_linear_job(tmp_path, _CACHED_BY_ADDRESS, 3), tmp_path)
    assert (result.verdict.status, result.verdict.reason) == ("integrity_violation", "timed_output_mismatch")
    assert "new values at the same addresses" in result.verdict.message
    assert result.timing.weight_copies == 3


def test_each_copy_but_the_first_is_called_once_before_the_turn_on_its_placements_first_set():
    seen = []
    copies = [lambda x, k=k: seen.append((k, int(x[0]))) for k in range(3)]
    side = placements.TimedSide(copies, [[torch.full((1,), float(k))] for k in range(6)])
    side.first_calls([[0, 1], [2, 3], [4, 5]])
    assert seen == [(1, 2), (2, 4)]  # the first copy's first calls are the warm-up's
    assert side.recent is None and side.last[1] is None  # nothing of them is kept


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        pass


def _placed_closures(candidate_ms: list[float], made: list[int]):
    """Both sides' closures at placements whose candidate takes ``candidate_ms[k]`` (the reference 0.3 ms at each),
    and a ``grow`` that makes the next ones in that list (``made``: each call's count asked for)."""
    count = [0]

    def pair(k: int):
        return (lambda: _spin(0.3), lambda: _spin(candidate_ms[k]))

    def grow(wanted: int):
        made.append(wanted)
        start = count[0]
        count[0] = min(len(candidate_ms), start + wanted)
        return [pair(k) for k in range(start, count[0])]

    return pair, grow, count


def test_placements_whose_speedups_differ_are_doubled_up_to_the_most_and_each_is_sampled_as_often():
    # Odd placements run the candidate twice as long: far beyond the batches' own noise. Two placements are judged
    # once each has three batches, two more are made, then four: eight, the most.
    settings = TimingSettings(
        min_samples=2, max_samples=300, batch=3, warmup_ms=0.0, target_noise=0.01, time_cap_s=30, max_placements=8
    )
    made: list[int] = []
    pair, grow, count = _placed_closures([0.1, 0.2] * 8, made)
    count[0] = 2
    first = [pair(0), pair(1)]
    timing, raw = measure_pair([r for r, _ in first], [c for _, c in first], CPU, settings, "small", 0, grow=grow)
    assert made == [2, 4] and timing.placements == 8 and timing.placements_added == 6
    placed = raw["batch_placement"]
    assert placed[:6] == [0, 1, 0, 1, 0, 1]  # in turn, three batches each, then judged
    # The new ones next (the fewest batches so far), after the batch queued while the sixth was judged.
    assert placed[6] == 0 and set(placed[7:9]) == {2, 3}
    kept = [placed.count(k) for k in range(8)]
    assert max(kept) - min(kept) <= 1 and min(kept) >= 3  # caught up, and every one judged on three
    assert timing.placement_spread > 0.5  # 3 over 1.5, less one, where nothing else moved them


def test_placements_of_one_speed_are_not_added_to_and_a_grow_that_makes_none_is_not_asked_again():
    settings = TimingSettings(
        min_samples=2, max_samples=60, batch=3, warmup_ms=0.0, target_noise=0.01, time_cap_s=30, max_placements=8
    )
    made: list[int] = []
    pair, grow, count = _placed_closures([0.1, 0.2], made)
    count[0] = 2  # no more to make: asked for two, it makes none
    first = [pair(0), pair(1)]
    timing, raw = measure_pair([r for r, _ in first], [c for _, c in first], CPU, settings, "small", 0, grow=grow)
    assert made == [2] and timing.placements == 2 and timing.placements_added == 0
    assert timing.stop_reason == "max_samples" and set(raw["batch_placement"]) == {0, 1}


def _judged(candidate_by_batch: list[float], placed: list[int]) -> dict:
    """Samples of batches of two pairs: the reference 2.0 ms, the candidate as given per batch."""
    return {"reference": [2.0] * 2 * len(placed), "candidate": [ms for ms in candidate_by_batch for _ in range(2)]}


@pytest.mark.parametrize(
    ("candidate", "placed", "target", "most", "wanted"),
    [
        # placement 1 10% slower, each placement's batches within 0.1%: as many again
        ([1.0, 1.1, 1.001, 1.101, 0.999, 1.099], [0, 1, 0, 1, 0, 1], 0.002, 16, 2),
        ([1.0, 1.1, 1.001, 1.101, 0.999, 1.099], [0, 1, 0, 1, 0, 1], 0.002, 3, 1),  # up to the most
        ([1.0, 1.1, 1.001, 1.101, 0.999, 1.099], [0, 1, 0, 1, 0, 1], 0.002, 2, 0),  # at the most
        ([1.0, 1.1, 1.001, 1.101, 0.999, 1.099], [0, 1, 0, 1, 0, 1], 0.05, 16, 0),  # the error under the target
        # each placement's batches as far apart as the placements: their means differ by what the batches put in
        ([1.0, 1.1, 1.1, 1.0, 1.0, 1.1, 1.1, 1.0], [0, 1, 0, 1, 0, 1, 0, 1], 0.002, 16, 0),
        ([1.0, 1.1, 1.001], [0, 1, 0], 0.002, 16, 0),  # placement 1 has one batch: not judged
        # the means 2% apart, the batches 1% about them: F 6, an error beyond the target but within what noise does
        ([1.0, 1.02, 1.01, 1.03, 0.99, 1.01], [0, 1, 0, 1, 0, 1], 0.002, 16, 0),
    ],
)
def test_more_placements_are_wanted_where_theirs_differ_beyond_their_batches_noise(
    candidate, placed, target, most, wanted
):
    settings = TimingSettings(target_noise=target, max_placements=most)
    assert placements_wanted(_judged(candidate, placed), placed, 2, 2, settings) == wanted


def test_a_placement_maker_adds_groups_of_fresh_sets_on_the_copies_in_turn_and_calls_each_side_first(monkeypatch):
    task = _Task(1000)
    settings = TimingSettings(input_sets=2, placements=2)
    sets, groups = placements.timing_inputs(task.module, {}, CPU, 7, settings)
    calls = {"reference": [], "candidate": []}

    def copies(side: str, count: int):
        return [lambda x, k=k: calls[side].append((k, x.data_ptr())) or x * 2 for k in range(count)]

    sides = [placements.TimedSide(copies("reference", 2), sets), placements.TimedSide(copies("candidate", 3), sets)]
    monkeypatch.setattr(placements, "GROWN_INPUTS_BUDGET_BYTES", 5 * 4000)  # two groups of two 4,000-byte sets
    maker = placements.PlacementMaker(task.module, {}, CPU, 7, groups, sides)
    made = maker(3)
    assert len(made) == 2 and groups == [[0, 1], [2, 3], [4, 5], [6, 7]] and len(sets) == 8
    # Seeds continuing the first sets': set 4 is what timing_inputs would have made fifth.
    torch.manual_seed(0)
    expected, _ = placements.timing_inputs(task.module, {}, CPU, 7, TimingSettings(input_sets=2, placements=4))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(sets, expected))
    # Each side called once on each new group's first set, on the placement's copy (modulo the copies).
    assert calls["reference"] == [(0, sets[4][0].data_ptr()), (1, sets[6][0].data_ptr())]
    assert calls["candidate"] == [(2, sets[4][0].data_ptr()), (0, sets[6][0].data_ptr())]
    reference, candidate = made[1]
    candidate()
    assert sides[1].last[0] == 6 and calls["candidate"][-1] == (0, sets[6][0].data_ptr())
    assert maker(1) == []  # the budget spent: none more


def test_the_worker_makes_placements_during_the_turn_where_its_candidates_speed_follows_them(tmp_path):
    # The candidate's work grows with its input set's first value, so each placement (one set each) runs at a speed
    # of its own: the worker makes placements up to the most, and the checks after the timing still pass. One CPU
    # thread for torch and batches of 8 pairs: with the host's two cores busy elsewhere, a matmul split over two
    # threads waited for a descheduled one and its batches' speedups spread too far to tell the placements apart
    # (5 of 8 failed with batches of 4; 1 of 10 as here).
    import torch

    from runner.worker.evaluate import evaluate

    varying = _LINEAR_TASK.replace("class Model(", "class ModelNew(").replace(
        """    def forward(self, x):
        return self.linear(x)""",
        """    def forward(self, x):
        for _ in range(int(abs(float(x[0, 0])) * 40)):
            self.linear(x)
        return self.linear(x)""",
    )
    job = _linear_job(
        tmp_path,
        varying,
        4,
        perf_rows=8192,
        max_placements=8,
        input_sets=1,
        batch=8,
        warmup_ms=20.0,
        max_samples=400,
        target_noise=0.005,
        time_cap_s=30,
    )
    job["timing"]["input_seed"] = 3
    job["threads"] = 1
    threads = torch.get_num_threads()
    # Up to three measurements: on a host busy elsewhere the batches can be too noisy for the judge to tell the
    # placements apart (rightly so), which CI's host once was with this very measurement; a worker that never makes
    # them fails all three.
    try:
        for _ in range(3):
            result = evaluate(job, tmp_path)
            assert result.verdict.status == "correct", result.verdict
            if result.timing.placements_added:
                break
    finally:
        torch.set_num_threads(threads)  # the worker's setting, not the test process's
    assert result.timing.placements == 8 and result.timing.placements_added == 4
    assert result.timing.weight_copies == 4
