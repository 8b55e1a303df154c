"""The placements' large inputs at offsets inside their blocks (``runner/worker/input_offsets.py``): the offsets'
walk, and nothing moved on a CPU. On the GPU: ``tests/test_gpu.py::test_placements_large_inputs_start_at_their_offsets``
and ``::test_an_evaluation_records_the_offsets_its_placements_inputs_got``."""

from __future__ import annotations

import types

import torch

from runner.worker import input_offsets, placements
from runner.worker.input_offsets import (
    OFFSET_MIN_BYTES,
    OFFSET_SPAN_BYTES,
    OFFSET_STEP_BYTES,
    InputOffsets,
    movable,
    placement_offset,
)
from runner.worker.protocol import TimingSettings


def test_the_first_placement_stays_and_the_others_spread_over_the_span_in_steps():
    offsets = [placement_offset(k) for k in range(16)]
    assert offsets[0] == 0
    assert all(0 <= o < OFFSET_SPAN_BYTES and o % OFFSET_STEP_BYTES == 0 for o in offsets)
    assert len(set(offsets)) == 16  # sixteen placements (the most a measurement makes): sixteen offsets
    # Evenly: for any count of placements, no gap between neighbouring offsets (the span taken as a circle) is over
    # three times the even gap, so the pooled samples cover the span whatever phase the process got.
    for count in (2, 4, 8, 12, 16):
        ordered = sorted(placement_offset(k) for k in range(count))
        gaps = [b - a for a, b in zip(ordered, ordered[1:])] + [OFFSET_SPAN_BYTES - ordered[-1] + ordered[0]]
        assert max(gaps) <= 3 * OFFSET_SPAN_BYTES / count, (count, ordered)


def test_on_a_cpu_nothing_moves_and_nothing_is_recorded():
    offsets = InputOffsets()
    big = torch.zeros(8 << 20)  # 32 MiB, over the size that moves on a GPU
    for placement in range(4):
        inputs = [big, 3]
        assert offsets.place(inputs, placement)[0] is big
    assert offsets.record() is None and offsets.pools == []


def test_only_large_dense_tensors_with_storages_of_their_own_are_moved():
    """What ``place`` moves on a GPU, judged here on host tensors (the same rule on any device): the GPU's crash on a
    method of the judgement that no torch has (``is_non_overlapping_and_dense``) passed every CPU test before."""
    elements = OFFSET_MIN_BYTES // 4
    large = torch.zeros(elements)
    assert movable(large, [large])
    assert movable(large.view(-1, 1024).t(), [])  # a transpose: dense, in another order
    assert movable(torch.zeros(4, 1, elements // 4), [])  # a dimension of one has any stride
    assert not movable(torch.zeros(elements - 1), [])  # under the size
    assert not movable(torch.zeros(2 * elements)[::2], [])  # every other element: not dense
    assert not movable(torch.zeros(2 * elements)[elements:], [])  # not from its storage's start
    assert not movable(torch.zeros(2 * elements)[:elements], [])  # its storage holds more than it
    assert not movable(torch.zeros(1024).expand(elements // 1024, 1024), [])  # expanded: overlapping
    assert not movable(large, [large, large.view(-1)])  # another input shares its storage
    assert not movable(3, [])


def test_a_tensor_the_allocator_will_not_move_stays_and_the_record_says_why(monkeypatch):
    """Where the move fails (another torch's allocator, say), the input stays as it was made and the evaluation goes
    on; the record names the first placement it happened at. A tensor on a (pretended) GPU is asked of; the move is
    a test double here (no GPU on this machine), the real one runs in tests/test_gpu.py."""
    large = torch.zeros(OFFSET_MIN_BYTES // 4)

    def refuse(self, tensor, offset, placement):
        raise RuntimeError("no pool here")

    monkeypatch.setattr(InputOffsets, "_at_offset", refuse)
    monkeypatch.setattr(input_offsets, "_on_gpu", lambda value: True)
    offsets = InputOffsets()
    for placement in (1, 2):
        assert offsets.place([large], placement)[0] is large
    assert offsets.record()["not_moved"] == [{"placement": 1, "why": "RuntimeError: no pool here"}]
    assert offsets.record()["placements"] == {}


def test_timing_inputs_and_placements_made_during_the_turn_pass_each_group_its_placement():
    """Each group's sets go through ``place`` with the group's placement, one by one as they are made (the very first
    set, made before the groups are known, is the first placement's and stays), those made during the turn too."""
    asked = []

    class Recording(InputOffsets):
        def place(self, inputs, placement):
            asked.append(placement)
            return inputs

    module = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64)])
    recording = Recording()
    settings = TimingSettings(input_sets=2, placements=3)
    sets, groups = placements.timing_inputs(module, {}, torch.device("cpu"), 5, settings, recording)
    assert asked == [0, 1, 1, 2, 2] and groups == [[0, 1], [2, 3], [4, 5]]
    sides = [placements.TimedSide([lambda x: x * 2], sets), placements.TimedSide([lambda x: x + 1], sets)]
    maker = placements.PlacementMaker(module, {}, torch.device("cpu"), 5, groups, sides, recording)
    assert len(maker(2)) == 2 and asked[5:] == [3, 3, 4, 4]
