"""The Triton kernels of the fused checks: the output comparison and the float64 error (called by
``fused_checks.py``), the differing-bytes count and the poison fill (called by ``fused_integrity.py``).

Imported only where a CUDA output is checked (Triton costs an import, and a CPU image may lack it).
Rounded as PyTorch rounds: the division is IEEE (``div_rn`` in float32, where Triton's ``/`` is not), and
the callers launch with ``enable_fp_fusion=False``, so ``atol + rtol * |r|`` rounds twice, not once
in a fused multiply-add: the same elements fall outside the tolerance on both paths.
"""

from __future__ import annotations

import triton
import triton.language as tl


# Not specialised on the sizes: one compiled variant per dtype serves every output.
@triton.jit(do_not_specialize=["n"])
def compare_kernel(ref_ptr, got_ptr, n, tolerance_ptr, out_ptr, WORK_FP64: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    atol = tl.load(tolerance_ptr)  # float64, as PyTorch holds a Python scalar, and cast like it below
    rtol = tl.load(tolerance_ptr + 1)
    tiny = tl.load(tolerance_ptr + 2)
    if WORK_FP64:
        r = tl.load(ref_ptr + offsets, mask=mask, other=0.0).to(tl.float64)
        g = tl.load(got_ptr + offsets, mask=mask, other=0.0).to(tl.float64)
    else:
        r = tl.load(ref_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(got_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        atol = atol.to(tl.float32)
        rtol = rtol.to(tl.float32)
        tiny = tiny.to(tl.float32)
    r_nan = r != r
    g_nan = g != g
    abs_r = tl.abs(r)
    r_inf = abs_r == float("inf")
    g_inf = tl.abs(g) == float("inf")
    special = r_nan | g_nan | r_inf | g_inf
    diff = tl.where(special, 0.0, tl.abs(g - r))  # 0 is within every bound
    nan_mismatch = tl.sum((r_nan != g_nan).to(tl.int64), axis=0)
    inf_mismatch = tl.sum((r_inf != g_inf).to(tl.int64), axis=0) + tl.sum((r_inf & (r != g)).to(tl.int64), axis=0)
    outside = tl.sum((diff > atol + rtol * abs_r).to(tl.int64), axis=0)
    max_abs = tl.max(diff, axis=0).to(tl.float64)
    denominator = tl.where(special, 1.0, tl.maximum(abs_r, tiny))
    if WORK_FP64:
        relative = diff / denominator  # IEEE in float64
    else:
        relative = tl.math.div_rn(diff, denominator)
    max_rel = tl.max(relative, axis=0).to(tl.float64)
    tl.atomic_add(out_ptr, nan_mismatch)
    tl.atomic_add(out_ptr + 1, inf_mismatch)
    tl.atomic_add(out_ptr + 2, outside)
    tl.atomic_max(out_ptr + 3, max_abs.to(tl.int64, bitcast=True))
    tl.atomic_max(out_ptr + 4, max_rel.to(tl.int64, bitcast=True))


@triton.jit(do_not_specialize=["n"])
def squared_sums_kernel(value_ptr, reference_ptr, n, partial_ptr, BLOCK: tl.constexpr):
    block = tl.program_id(0)
    offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    v = tl.load(value_ptr + offsets, mask=mask, other=0.0).to(tl.float64)
    r = tl.load(reference_ptr + offsets, mask=mask, other=0.0).to(tl.float64)
    finite = (tl.abs(v) < float("inf")) & (tl.abs(r) < float("inf"))  # NaN compares false: dropped too
    d = tl.where(finite, v - r, 0.0)
    r = tl.where(finite, r, 0.0)
    tl.store(partial_ptr + 2 * block, tl.sum(d * d, axis=0))
    tl.store(partial_ptr + 2 * block + 1, tl.sum(r * r, axis=0))


@triton.jit(do_not_specialize=["blocks"])
def sum_pairs_kernel(partial_ptr, blocks, out_ptr, BLOCK: tl.constexpr):
    first = tl.zeros([BLOCK], dtype=tl.float64)
    second = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(0, blocks, BLOCK):
        index = start + tl.arange(0, BLOCK)
        mask = index < blocks
        first += tl.load(partial_ptr + 2 * index, mask=mask, other=0.0)
        second += tl.load(partial_ptr + 2 * index + 1, mask=mask, other=0.0)
    tl.store(out_ptr, tl.sum(first, axis=0))
    tl.store(out_ptr + 1, tl.sum(second, axis=0))


# The integrity checks' kernels work on bytes and words, so no rounding: exact on every path.
@triton.jit(do_not_specialize=["n"])
def differing_bytes_kernel(now_ptr, before_ptr, n: tl.int64, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    now = tl.load(now_ptr + offsets, mask=mask, other=0)
    before = tl.load(before_ptr + offsets, mask=mask, other=0)
    differing = tl.sum((now != before).to(tl.int32), axis=0).to(tl.int64)
    tl.atomic_add(out_ptr, differing, mask=differing > 0)  # the usual answer is 0: no atomics then


# ``even`` and ``odd`` typed int64 and not specialised: one compiled variant per word size serves every pattern.
@triton.jit(do_not_specialize=["n", "even", "odd"])
def fill_words_kernel(words_ptr, n: tl.int64, even: tl.int64, odd: tl.int64, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    words = tl.where(offsets % 2 == 0, even, odd).to(words_ptr.dtype.element_ty)  # truncated to the word
    tl.store(words_ptr + offsets, words, mask=offsets < n)
