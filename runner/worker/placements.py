"""The timed call's placements: its input sets, outputs and weights at several sets of addresses.

Where a kernel's tensors lie in memory moves its speed by more than one measurement's noise (a 1 GiB
transpose's speedup by up to 5% on the H100: BENCHMARKS.md, twelfth session), and one process sees one
placement. ``timing_inputs`` makes every timed input set up front and groups them, one group per
placement; ``weight_copies`` builds a side's model once per placement (the same constructor and seed,
so the same weights at other addresses) while the copies fit a budget: six instances of one GEMV's
2 GiB of weights, in one process, ran 0.4% apart, and a linear layer's 1.4% (BENCHMARKS.md, eighteenth
session). ``TimedSide`` gives one side's timed closure per group, each on its placement's copy, and
keeps its last outputs alive so they too land at several addresses. Where the first placements' speedups differ
by more than the noise target allows, the timing loop asks for more during its turn: ``PlacementMaker`` makes
them as the first ones were made, beyond the budget above (a 1 GiB transpose's input gets four placements under
it, sixteen with them: BENCHMARKS.md, thirty-fifth session), while the device has the memory. The timing loop
(``timing.py``) takes the placements in turn and decides when more are wanted; this module makes no measurement.
"""

from __future__ import annotations

import collections

import torch

from runner.worker.input_offsets import OFFSET_SPAN_BYTES, InputOffsets
from runner.worker.loading import as_output_list, make_inputs
from runner.worker.protocol import TimingSettings

# The timed input sets may take this much memory together (and each side's held outputs as much);
# beyond it fewer are made, or fewer held.
TIMING_INPUT_BUDGET_BYTES = 4 << 30
# One side's copies of its weights may take this much together; beyond it fewer placements get their own.
WEIGHT_COPIES_BUDGET_BYTES = 8 << 30
# The input sets of the placements made during the turn may take this much together, and each is made only where
# the device keeps this much free beside it and the outputs it will hold.
GROWN_INPUTS_BUDGET_BYTES = 16 << 30
GROWN_FREE_RESERVE_BYTES = 4 << 30


def timing_inputs(
    module, dims: dict, device: torch.device, seed: int, settings: TimingSettings, offsets: InputOffsets | None = None
) -> tuple[list, list[list[int]]]:
    """The timed input sets, all made up front and held, so each lies at addresses of its own; and their
    placements: groups of ``input_sets`` indices, one group per placement. Where they would take more than
    the budget, the groups hold fewer sets first (one set each, at the least), then there are fewer groups:
    large inputs too depend on their placement (the transpose above is one). ``offsets``: each group's large
    tensors moved to its placement's offset inside their blocks (``input_offsets.py``)."""
    first = make_inputs(module, dims, device, seed)
    if settings.graphs and device.type == "cuda":
        return [first], [[0]]  # a captured graph replays fixed addresses: one set
    affordable = max(1, TIMING_INPUT_BUDGET_BYTES // max(_tensor_bytes(first), 1))
    group_count = max(1, min(settings.placements, affordable))
    per_group = max(1, min(settings.input_sets, affordable // group_count))
    count = per_group * group_count
    groups = [list(range(g * per_group, (g + 1) * per_group)) for g in range(group_count)]
    sets = [first]
    for index in range(1, count):
        made = make_inputs(module, dims, device, seed + index)
        # Moved as soon as made: the next set is made in the blocks this one's originals leave to the allocator.
        sets.append(made if offsets is None else offsets.place(made, index // per_group))
    return sets, groups


def weight_bytes(model) -> int:
    """The bytes of a model's parameters and buffers (each storage once); 0 for what is not a module."""
    if not isinstance(model, torch.nn.Module):
        return 0
    storages = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        storage = tensor.untyped_storage()
        storages[(tensor.device, storage.data_ptr())] = storage.nbytes()
    return sum(storages.values())


def weight_copies(build_reference, build_candidate, placements: int) -> tuple[list, list]:
    """Both sides' models, each from its ``build`` (the same constructor and seed: the same weights), all
    alive at once so each copy's weights lie at addresses of their own. The two sides get as many copies:
    one per placement, while the heavier side's copies fit the budget (a side that holds no weights of its
    own, nothing to place, does not limit the other); one where neither holds any."""
    references, candidates = [build_reference()], [build_candidate()]
    heaviest = max(weight_bytes(references[0]), weight_bytes(candidates[0]))
    count = max(1, min(placements, WEIGHT_COPIES_BUDGET_BYTES // heaviest)) if heaviest else 1
    references += [build_reference() for _ in range(count - 1)]
    candidates += [build_candidate() for _ in range(count - 1)]
    return references, candidates


class TimedSide:
    """One side of the measurement: its models (one per weight copy), the input sets, and the outputs of its
    last calls.

    ``rotation(group, placement)`` is the timed closure of one placement: each call takes the next set of
    the group, on copy ``placement`` of the weights (modulo their count).
    The outputs of the side's last calls stay alive (as many as a group has sets, while they take no more
    than the inputs' budget), so the caching allocator puts each call's output at another address than
    those before it: the outputs too are at several placements, not in the same block or two for every
    call of the process.
    The last output is kept with its set's index and the copy that made it, for the checks after the timing."""

    def __init__(self, models: list, input_sets: list) -> None:
        self.models = models
        self.input_sets = input_sets
        self.recent: collections.deque | None = None  # sized at the first call, from its output's bytes
        self.last: tuple[int, object, object] = (0, None, models[0])

    def first_calls(self, groups: list[list[int]]) -> None:
        """Call each copy but the first once, on the first set of its placement's group: what an instance sets
        up on its first call (a compile's guards, a workspace, an autotune) is done before the turn, where
        the warm-up calls only the first placement. Their outputs are not kept."""
        for placement, model in enumerate(self.models[1:], start=1):
            model(*self.input_sets[groups[placement][0]])

    def rotation(self, group: list[int], placement: int = 0):
        calls = 0
        model = self.models[placement % len(self.models)]

        def call():
            nonlocal calls
            index = group[calls % len(group)]
            calls += 1
            output = model(*self.input_sets[index])
            self.last = (index, output, model)
            self._keep(output, len(group))
            return output

        return call

    def _keep(self, output, held: int) -> None:
        if self.recent is None:
            size = _tensor_bytes(as_output_list(output))
            self.recent = collections.deque(maxlen=max(1, min(held, TIMING_INPUT_BUDGET_BYTES // max(size, 1))))
        self.recent.append(output)


def _tensor_bytes(values) -> int:
    """The bytes of the tensors among ``values`` (an input set, a call's outputs)."""
    return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))


class PlacementMaker:
    """More placements for a measurement during its turn (``measure_pair``'s ``grow``). Each is a group of fresh input
    sets, as many as the first groups hold, made as ``timing_inputs`` made those (their seeds continuing theirs), on
    the sides' weight copies in turn (as ``TimedSide.rotation`` takes them); both sides are called once on its first
    set before it is sampled, as ``TimedSide.first_calls`` does before the turn. They are added to the input sets
    and groups the sides share, so the checks after the timing find the set of the last call whichever it was.
    Placements are made while their sets together stay within ``GROWN_INPUTS_BUDGET_BYTES`` and, on a GPU, the
    device keeps ``GROWN_FREE_RESERVE_BYTES`` free beside each one's sets and outputs. ``offsets``: their large
    tensors moved to each new placement's offset, as ``timing_inputs`` moved the first ones'."""

    def __init__(
        self,
        module,
        dims: dict,
        device: torch.device,
        seed: int,
        groups: list[list[int]],
        sides: list[TimedSide],
        offsets: InputOffsets | None = None,
    ) -> None:
        self.module, self.dims, self.device, self.seed = module, dims, device, seed
        self.groups, self.sides, self.offsets = groups, sides, offsets
        self.input_sets = sides[0].input_sets
        self.made_bytes = 0

    def __call__(self, count: int) -> list[tuple]:
        made = []
        for _ in range(count):
            per_group = len(self.groups[0])
            sets_bytes = per_group * _tensor_bytes(self.input_sets[0])
            pads = per_group * OFFSET_SPAN_BYTES if self.offsets is not None else 0
            if self.made_bytes + sets_bytes > GROWN_INPUTS_BUDGET_BYTES or not self._room_for(2 * sets_bytes + pads):
                break
            start = len(self.input_sets)
            placement = len(self.groups)
            for k in range(per_group):
                made_set = make_inputs(self.module, self.dims, self.device, self.seed + start + k)
                self.input_sets.append(made_set if self.offsets is None else self.offsets.place(made_set, placement))
            group = list(range(start, start + per_group))
            self.groups.append(group)
            for side in self.sides:
                side.models[placement % len(side.models)](*self.input_sets[group[0]])
            made.append(tuple(side.rotation(group, placement) for side in self.sides))
            self.made_bytes += sets_bytes
        return made

    def _room_for(self, size: int) -> bool:
        """Whether the device keeps ``GROWN_FREE_RESERVE_BYTES`` free beside ``size`` bytes more (host memory: yes)."""
        if self.device.type != "cuda":
            return True
        free, _ = torch.cuda.mem_get_info(self.device)
        return free - size >= GROWN_FREE_RESERVE_BYTES
