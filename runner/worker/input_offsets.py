"""Where inside its block of device memory each placement's large input tensors start: ``InputOffsets``.

The placements (``placements.py``) put each input set at addresses of its own by making it anew, but on the H200 a new
large allocation starts where the ones before it started, modulo the periods that move some kernels' speed: the eager
NCHW->NHWC permute of permute_nchw_to_nhwc_sdxl_vae_fp16 (a 1 GiB input) ran at one speed on every input of one
process, however deep (spacers of 0.5-8 GiB before it), and at 4.69-5.26 ms as the same input's start moved in 2 MiB
steps over 256 MiB inside one process, a spike every 16 MiB and a swell every 128 MiB; which phase a process's
allocations got set its speed (4.90 or 5.08 ms), and so torch_compile's pair moved 3.47% on it (BENCHMARKS.md,
fifty-third and fifty-fifth sessions). So placement ``k``'s large tensors are copied to blocks of their own and start
``placement_offset(k)`` bytes into them: 0 for the first placement, then a walk by the golden ratio over
``OFFSET_SPAN_BYTES`` in ``OFFSET_STEP_BYTES`` steps, which spreads any number of placements evenly over the span; a
process's measurement then pools the speeds over the span, whichever phase the process got.

A block is a private memory pool of the caching allocator (``torch.cuda.MemPool``): allocated whole, given back to
the pool, then a pad of the offset's bytes and the tensor taken from it in turn, so the tensor starts at the offset
(checked from the pointers: where it does not, the offset found is recorded instead; where the allocator will not
do it, another torch's say, the tensor stays where it was and the record says why). The tensor is an ordinary one,
its own storage, its strides and dtype the original's, its storage offset 0; only dense tensors of at least
``OFFSET_MIN_BYTES`` that share their storage with no other input are moved. On a CPU nothing moves. The offsets
each placement got go into the result (``environment.input_offsets``).
"""

from __future__ import annotations

import math

import torch

# Placements' large inputs start this far into their blocks, at most, in steps of this many bytes (the permute's
# speed moved with each 2 MiB step; its longest period was 128 MiB).
OFFSET_SPAN_BYTES = 128 << 20
OFFSET_STEP_BYTES = 2 << 20
# Smaller tensors are left where the allocator put them (its large pool packs several into one segment anyway).
OFFSET_MIN_BYTES = 16 << 20
_GOLDEN = (math.sqrt(5) - 1) / 2


def placement_offset(placement: int) -> int:
    """The offset in bytes of placement ``placement``'s large tensors inside their blocks: 0, then the golden ratio's
    multiples (modulo 1) of the span, rounded down to a step."""
    steps = OFFSET_SPAN_BYTES // OFFSET_STEP_BYTES
    return int((placement * _GOLDEN) % 1.0 * steps) * OFFSET_STEP_BYTES


def _dense(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s elements fill its extent once each, in some order of its dimensions (a transpose of a
    contiguous tensor is; a slice with a step, or an expanded one, is not)."""
    expected = 1
    for size, stride in sorted(zip(tensor.shape, tensor.stride()), key=lambda pair: pair[1]):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _on_gpu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "cuda"


def movable(value, others: list) -> bool:
    """Whether ``value`` is a dense tensor large enough to move, its storage its own (from its start, no byte more) and
    no other input's. Any device: ``place`` asks only of the GPU's."""
    if not isinstance(value, torch.Tensor):
        return False
    size = value.numel() * value.element_size()
    if size < OFFSET_MIN_BYTES or value.storage_offset() != 0 or not _dense(value):
        return False
    storage = value.untyped_storage()
    if storage.nbytes() != size:
        return False
    return not any(
        isinstance(other, torch.Tensor)
        and other is not value
        and other.untyped_storage().data_ptr() == storage.data_ptr()
        for other in others
    )


class InputOffsets:
    """Moves placements' large input tensors to their offsets, keeps the blocks' pools while the run needs them, and
    records the offsets got: ``record()``, one list per placement moved (the offset each moved tensor got, in bytes)."""

    def __init__(self) -> None:
        self.pools: list = []
        self.by_placement: dict[int, list[int]] = {}
        self.not_moved: dict[str, int] = {}  # why a tensor could not be moved: the first placement it happened at

    def place(self, inputs: list, placement: int) -> list:
        """``inputs`` with each movable tensor replaced by a copy at placement ``placement``'s offset (the first
        placement's stay where they are: offset 0 of their own allocations)."""
        offset = placement_offset(placement)
        if offset == 0:
            return inputs
        moved = list(inputs)
        for index, value in enumerate(inputs):
            if _on_gpu(value) and movable(value, inputs):
                try:
                    moved[index] = self._at_offset(value, offset, placement)
                except Exception as exc:  # noqa: BLE001 - another torch's allocator: the tensor stays, and says why
                    self.not_moved.setdefault(f"{type(exc).__name__}: {exc}"[:300], placement)
        return moved

    def _at_offset(self, tensor: torch.Tensor, offset: int, placement: int) -> torch.Tensor:
        pool = torch.cuda.MemPool()
        size = tensor.numel() * tensor.element_size()
        with torch.cuda.use_mem_pool(pool, tensor.device):
            block = torch.empty(offset + size, dtype=torch.uint8, device=tensor.device)
            start = block.data_ptr()
            del block  # back to the pool, one free block: the pad and the tensor are cut from its start in turn
            pad = torch.empty(offset, dtype=torch.uint8, device=tensor.device)
            copy = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=tensor.device)
        del pad
        copy.copy_(tensor)
        if tensor.requires_grad:
            copy.requires_grad_(True)
        self.pools.append(pool)
        self.by_placement.setdefault(placement, []).append(copy.data_ptr() - start)
        return copy

    def record(self) -> dict | None:
        """What moved: the span and step, and each moved placement's offsets; None where nothing moved."""
        if not self.by_placement and not self.not_moved:
            return None
        record = {
            "span_bytes": OFFSET_SPAN_BYTES,
            "step_bytes": OFFSET_STEP_BYTES,
            "min_tensor_bytes": OFFSET_MIN_BYTES,
            "placements": {str(k): offsets for k, offsets in sorted(self.by_placement.items())},
        }
        if self.not_moved:
            record["not_moved"] = [{"placement": k, "why": why} for why, k in self.not_moved.items()]
        return record
