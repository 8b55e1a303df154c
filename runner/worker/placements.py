"""The timed call's placements: its input sets and outputs at several sets of addresses.

Where a kernel's tensors lie in memory moves its speed by more than one measurement's noise (a 1 GiB
transpose's speedup by up to 5% on the H100: BENCHMARKS.md, twelfth session), and one process sees one
placement. ``timing_inputs`` makes every timed input set up front and groups them, one group per
placement; ``TimedSide`` gives one side's timed closure per group and keeps its last outputs alive so
they too land at several addresses. The timing loop (``timing.py``) takes the placements in turn; this
module makes no measurement and decides nothing about sampling.
"""

from __future__ import annotations

import collections

import torch

from runner.worker.loading import as_output_list, make_inputs
from runner.worker.protocol import TimingSettings

# The timed input sets may take this much memory together (and each side's held outputs as much);
# beyond it fewer are made, or fewer held.
TIMING_INPUT_BUDGET_BYTES = 4 << 30


def timing_inputs(
    module, dims: dict, device: torch.device, seed: int, settings: TimingSettings
) -> tuple[list, list[list[int]]]:
    """The timed input sets, all made up front and held, so each lies at addresses of its own; and their
    placements: groups of ``input_sets`` indices, one group per placement. Where they would take more than
    the budget, the groups hold fewer sets first (one set each, at the least), then there are fewer groups:
    large inputs too depend on their placement (the transpose above is one)."""
    first = make_inputs(module, dims, device, seed)
    if settings.graphs and device.type == "cuda":
        return [first], [[0]]  # a captured graph replays fixed addresses: one set
    affordable = max(1, TIMING_INPUT_BUDGET_BYTES // max(_tensor_bytes(first), 1))
    group_count = max(1, min(settings.placements, affordable))
    per_group = max(1, min(settings.input_sets, affordable // group_count))
    count = per_group * group_count
    sets = [first] + [make_inputs(module, dims, device, seed + k) for k in range(1, count)]
    return sets, [list(range(g * per_group, (g + 1) * per_group)) for g in range(group_count)]


class TimedSide:
    """One side of the measurement: its model, the input sets, and the outputs of its last calls.

    ``rotation(group)`` is the timed closure of one placement: each call takes the next set of the group.
    The outputs of the side's last calls stay alive (as many as a group has sets, while they take no more
    than the inputs' budget), so the caching allocator puts each call's output at another address than
    those before it: the outputs too are at several placements, not in the same block or two for every
    call of the process.
    The last output is kept with its set's index for the checks after the timing."""

    def __init__(self, model, input_sets: list) -> None:
        self.model = model
        self.input_sets = input_sets
        self.recent: collections.deque | None = None  # sized at the first call, from its output's bytes
        self.last: tuple[int, object] = (0, None)

    def rotation(self, group: list[int]):
        calls = 0

        def call():
            nonlocal calls
            index = group[calls % len(group)]
            calls += 1
            output = self.model(*self.input_sets[index])
            self.last = (index, output)
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
