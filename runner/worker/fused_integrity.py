"""The per-call integrity checks' device work as Triton kernels, for CUDA tensors: whether an input's
bytes changed during the call, and the poison written into the allocator before it.

Why: ``integrity.py`` compares each input with its snapshot (``torch.equal``: an eq kernel, an
all-reduction and a sync) and fills poison blocks with ``fill_``, one fill kernel per dtype; in a fresh
process each of those kernels loads its module on first call, about 0.088 s per evaluation (median,
H100) while the evaluation holds the GPU's token. A prepared Triton kernel is one small module. Probed
on the H100 (torch 2.11, triton 3.6; fresh processes, a 2048x4096 input and output, float32 or
bfloat16; ``.state/probe_integrity_first_use.py``, not in the repository): the first checked call's
snapshot, poison and comparison took 0.037-0.066 s on PyTorch's ops, 0.005-0.006 s on the prepared
kernels; later calls 1 ms or less on either. With the checks' cache still empty, the first process
also builds Triton's launchers on first call (0.6 s, once per cache).

Same verdicts as the PyTorch paths, bit for bit:
- ``differing_bytes`` counts the bytes that differ between an input and its snapshot (integer
  compares and an integer sum, so any changed byte is found, NaN payloads included), for all of a
  call's inputs with one read from the device (``queue_differing_bytes_each``); the snapshot
  stays ``clone()``, which for a contiguous uint8 tensor is a device-to-device ``cudaMemcpyAsync``,
  no kernel (``copy_device_to_device``'s ``memcpy_eligible`` path).
- ``fill`` writes the bytes ``fill_`` writes, as words of the element's size (complex128 as pairs of
  int64 words): the pattern is read from a one-element CPU ``fill_`` of the same value, and CUDA's
  ``fill_`` converts its scalar on the host the same way (``FillKernel.cu``: ``value.to<scalar_t>()``),
  so a float NaN is ``0x7FC00000``, a bfloat16 one ``0x7FC0``, a complex one NaN + 0j. Only the
  dtypes in ``FILLED`` (each compared with ``fill_`` byte for byte: ``tests/test_fused_integrity.py``)
  take the kernel; any other keeps ``fill_``.

``available(tensor)`` says where they apply: a CUDA tensor at a 16-byte aligned address (Triton
specialises a pointer on that; the prepared variants assume it, so another address would compile in the
job) in a process whose ``prepare()`` compiled every variant ahead of its job and loaded it, launching
nothing (a spare's head start, ``prewarm.py``). Unprepared, the first call would pay Triton's start-up
inside the job, more than PyTorch's ops cost (``fused_checks.py``); such a process, and any CPU run, keeps the PyTorch
paths. Compiled into and loaded from the checks' own cache (``KBENCH_CHECKS_CACHE``), never the
candidates' Triton cache, through what ``fused_checks`` owns for both kernel modules: ``kernels_module``,
``checks_cache``, ``warm_variants`` and ``failed_variants``.
"""

from __future__ import annotations

import torch

from runner.worker.fused_checks import checks_cache, failed_variants, kernels_module, warm_variants
from runner.worker.host_reads import Later

_BYTES_BLOCK = 4096  # bytes compared by one program: 32 a thread at 4 warps, two 16-byte loads of each buffer
_WORDS_BLOCK = 1024  # words written by one program
_WORDS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # by element size, at most 8 bytes
FILLED = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.bool,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
)

# Whether this process compiled every variant (``prepare``; a spare does, before its job).
_prepared = False


def available(tensor: torch.Tensor) -> bool:
    """Whether the kernels serve ``tensor``: a CUDA tensor at a 16-byte aligned address, in a process that
    prepared them."""
    return _prepared and tensor.is_cuda and tensor.data_ptr() % 16 == 0


def differing_bytes(now: torch.Tensor, before: torch.Tensor) -> int:
    """How many bytes differ between two same-size contiguous uint8 tensors on one CUDA device; one read
    from the device."""
    return queue_differing_bytes_each([(now, before)])()[0]


def queue_differing_bytes_each(pairs: list[tuple[torch.Tensor, torch.Tensor]]):
    """``differing_bytes`` of every ``(now, before)`` pair (all on one CUDA device): the kernels queued now; returns
    the call that reads the counts, one read from the device for all of them (``host_reads.Later``: without a wait
    once the device has passed them). Each read is a synchronisation, and with several evaluations in flight each
    waits for the GPU's time slice among their contexts."""
    if not pairs:
        return lambda: []
    # One counter per pair, 16 bytes apart (the prepared variant's pointer alignment), zeroed by the fill
    # kernel: no PyTorch kernel to load, and no copy from the host, which would synchronise too.
    counters = torch.empty(2 * len(pairs), dtype=torch.int64, device=pairs[0][0].device)
    fill(counters, 0)
    with checks_cache():
        for index, (now, before) in enumerate(pairs):
            n = now.numel()
            if n:
                kernels_module().differing_bytes_kernel[(-(-n // _BYTES_BLOCK),)](
                    now, before, n, counters[2 * index :], BLOCK=_BYTES_BLOCK
                )
    later = Later(counters)  # whole: a strided copy would copy on the device first
    return lambda: later.tolist()[::2]


def fill(block: torch.Tensor, value: float | bool | int) -> None:
    """Write ``value`` into every element of ``block``, a contiguous CUDA tensor of a dtype in ``FILLED``:
    the bytes ``block.fill_(value)`` writes."""
    words = block.reshape(-1).view(_WORDS[min(block.element_size(), 8)])
    n = words.numel()
    if n:
        even, odd = _pattern(block.dtype, value)
        with checks_cache():
            kernels_module().fill_words_kernel[(-(-n // _WORDS_BLOCK),)](words, n, even, odd, BLOCK=_WORDS_BLOCK)


def prepare() -> dict:
    """Compile (or load from the checks' own cache) the differing-bytes count and the fill for each word
    size, and load them into the CUDA context, launching nothing. Returns ``{variant: seconds}``; one that
    fails is recorded, never raised, and leaves this process on the PyTorch paths (``available`` is true only once every variant compiled)."""
    kernels = kernels_module()
    if kernels is None or not torch.cuda.is_available():
        return {"not done": "no Triton or no CUDA device"}
    variants = [
        (
            "differing bytes",
            kernels.differing_bytes_kernel,
            (torch.uint8, torch.uint8, _BYTES_BLOCK, torch.int64),
            {"BLOCK": _BYTES_BLOCK},
        )
    ]
    variants += [
        (f"fill {str(word)[6:]}", kernels.fill_words_kernel, (word, _WORDS_BLOCK, 0, 0), {"BLOCK": _WORDS_BLOCK})
        for word in _WORDS.values()
    ]
    done = warm_variants(variants)
    global _prepared
    _prepared = not failed_variants(done)
    return done


def _pattern(dtype: torch.dtype, value: float | bool | int) -> tuple[int, int]:
    """The words ``fill_`` writes for one element of ``dtype``, as signed integers: ``(even, odd)`` words of a
    two-word element (complex128: real, imaginary), the same word twice otherwise. Taken from a CPU
    ``fill_``: a few microseconds, no device work."""
    element = torch.empty(1, dtype=dtype).fill_(value)
    words = element.view(_WORDS[min(element.element_size(), 8)]).tolist()
    return words[0], words[-1]
