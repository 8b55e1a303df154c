"""Comparing a candidate's outputs with the reference's: shape, dtype, values.

Floating outputs use ``|a - b| <= atol + rtol * |b|`` elementwise with NaN where the
reference has NaN (and only there) and matching infinities; integer and bool outputs must
be exactly equal unless the task allows ``|a - b| <= atol``. A quantization contract may also
let a small ``mismatch_fraction`` of the elements lie outside that bound (a quantum off at
rounding ties, where ``x / s`` and ``x * (1 / s)`` round differently); NaN and infinity
patterns must still match exactly. The first failure is described in one line for the result record.
``queue_comparison`` queues the device work and returns the judgement, so that the correctness loop reads the
results after a synchronisation it makes anyway (``host_reads.py``); ``compare_outputs`` judges at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from runner.worker import fused_checks
from runner.worker.host_reads import Later

DEFAULT_TOLERANCE = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}


_CHUNK = 1 << 24


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    mismatched: int = 0


def tolerance_for(dtype: torch.dtype, override: dict | None) -> tuple[float, float]:
    atol, rtol = DEFAULT_TOLERANCE.get(dtype, (1e-2, 1e-2))
    if override:
        atol = float(override.get("atol", atol))
        rtol = float(override.get("rtol", rtol))
    return atol, rtol


def _allowed_mismatches(numel: int, tolerance: dict | None) -> int:
    fraction = float((tolerance or {}).get("mismatch_fraction", 0.0))
    return int(fraction * numel)


def _outside(mismatched: int, numel: int, tolerance: dict | None, bound: str, max_abs: float) -> str:
    allowed = _allowed_mismatches(numel, tolerance)
    if mismatched <= allowed:
        return ""
    limit = f" (at most {allowed} allowed)" if allowed else ""
    return f"{mismatched} of {numel} elements outside {bound}{limit} (max abs error {max_abs:.3g})"


def compare_outputs(expected: list, actual: list, tolerance: dict | None) -> Comparison:
    """Compare two flat output lists: the first output that differs, or the largest errors of all."""
    return queue_comparison(expected, actual, tolerance)()


def queue_comparison(expected: list, actual: list, tolerance: dict | None) -> Callable[[], Comparison]:
    """``compare_outputs``'s device work queued now, for every output; returns the call that reads the results
    (``host_reads.Later``: without a wait once the device has passed them) and judges them in order."""
    if len(expected) != len(actual):
        failed = Comparison(False, f"returned {len(actual)} outputs, expected {len(expected)}")
        return lambda: failed
    judges = [_queue_one(ref, got, tolerance) for ref, got in zip(expected, actual)]

    def judge() -> Comparison:
        worst = Comparison(True)
        for index, one in enumerate(judges):
            result = one()
            if not result.ok:
                result.reason = f"output {index}: {result.reason}"
                return result
            worst.max_abs_error = max(worst.max_abs_error, result.max_abs_error)
            worst.max_rel_error = max(worst.max_rel_error, result.max_rel_error)
        return worst

    return judge


def _queue_one(ref, got, tolerance: dict | None) -> Callable[[], Comparison]:
    if not isinstance(ref, torch.Tensor):
        same = Comparison(True) if ref == got else Comparison(False, f"value {got!r} != expected {ref!r}")
        return lambda: same
    failed = _mismatched_kind(ref, got)
    if failed is not None:
        return lambda: failed
    if got.device != ref.device:
        got = got.to(ref.device)
    if not ref.is_floating_point() and not ref.is_complex():
        return _queue_integers(ref, got, tolerance)
    atol, rtol = tolerance_for(ref.dtype, tolerance)
    counts = (fused_checks.queue_compare_counts if fused_checks.available(ref) else _queue_counts)(ref, got, atol, rtol)

    def judge() -> Comparison:
        nan_mismatch, inf_mismatch, mismatched, max_abs, max_rel = counts()
        if nan_mismatch:
            return Comparison(False, f"NaN pattern differs at {nan_mismatch} elements", mismatched=nan_mismatch)
        if inf_mismatch:
            return Comparison(False, f"infinities differ at {inf_mismatch} elements", mismatched=inf_mismatch)
        reason = _outside(mismatched, ref.numel(), tolerance, f"atol={atol:g} rtol={rtol:g}", max_abs)
        return Comparison(not reason, reason, max_abs, max_rel, mismatched)

    return judge


def _mismatched_kind(ref: torch.Tensor, got) -> Comparison | None:
    """What makes ``got`` no comparable tensor for ``ref`` (its type, shape or dtype), or None."""
    if type(got) is not torch.Tensor:
        return Comparison(False, f"is a {type(got).__name__}, expected a plain torch.Tensor")
    if got.shape != ref.shape:
        return Comparison(False, f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison(False, f"dtype {got.dtype} != expected {ref.dtype}")
    return None


def _queue_counts(ref: torch.Tensor, got: torch.Tensor, atol: float, rtol: float):
    """``(nan_mismatches, inf_mismatches, outside_tolerance, max_abs_error, max_rel_error)`` with PyTorch's ops, on
    any device (CUDA floating tensors take ``fused_checks.queue_compare_counts``, the same arithmetic): the device
    work queued now; returns the call that reads the result."""
    # Chunked, so that a 1G-element output costs a few hundred MB of temporaries, not 40 GB. The
    # counts and maxima stay on the device until the end: one synchronisation per output, not
    # several per chunk (on a GPU those waits were most of a correctness check's time).
    ref_flat, got_flat = ref.reshape(-1), got.reshape(-1)
    work = _working_dtype(ref.dtype)
    counts = torch.zeros(3, dtype=torch.int64, device=ref.device)  # NaN, infinity, tolerance mismatches
    maxima = torch.zeros(2, dtype=torch.float64, device=ref.device)  # abs, rel error
    for start in range(0, ref_flat.numel(), _CHUNK):
        r = ref_flat[start : start + _CHUNK].to(work)
        g = got_flat[start : start + _CHUNK].to(work)
        r_nan, g_nan, r_inf, g_inf = r.isnan(), g.isnan(), r.isinf(), g.isinf()
        abs_r = r.abs()
        special = r_nan | g_nan | r_inf | g_inf
        diff = (g - r).abs().masked_fill_(special, 0.0)  # 0 is within every bound
        counts += torch.stack(
            [
                (r_nan != g_nan).sum(),
                (r_inf != g_inf).sum() + (r_inf & (r != g)).sum(),
                (diff > atol + rtol * abs_r).sum(),
            ]
        )
        # Where either side is NaN or infinite the relative error is 0 too (NaN / NaN would poison the maximum).
        relative = diff / abs_r.masked_fill(special, 1.0).clamp_min(fused_checks.TINY)
        chunk_maxima = torch.stack([diff.max(), relative.max()]).double()
        torch.maximum(maxima, chunk_maxima, out=maxima)
    counted, largest = Later(counts), Later(maxima)

    def read() -> tuple[int, int, int, float, float]:
        nan_mismatch, inf_mismatch, mismatched = counted.tolist()
        max_abs, max_rel = largest.tolist()
        return nan_mismatch, inf_mismatch, mismatched, max_abs, max_rel

    return read


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float32 and float64 outputs (complex128 for complex ones, imaginary parts included);
    float32 for the 16-bit ones, where it holds every value exactly and rounds a difference by at most
    2^-24 of it, far inside their 1e-2 tolerances."""
    if dtype.is_complex:
        return torch.complex128
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return torch.float64


def _queue_integers(ref: torch.Tensor, got: torch.Tensor, tolerance: dict | None) -> Callable[[], Comparison]:
    atol = int((tolerance or {}).get("atol", 0))
    ref_flat, got_flat = ref.reshape(-1), got.reshape(-1)
    totals = torch.zeros(2, dtype=torch.int64, device=ref.device)  # mismatches, max abs difference
    for start in range(0, ref_flat.numel(), _CHUNK):
        r, g = ref_flat[start : start + _CHUNK], got_flat[start : start + _CHUNK]
        if ref.dtype == torch.bool:
            diff = (r != g).long()
        else:
            diff = (g.long() - r.long()).abs()
        if diff.numel():
            totals[0] += (diff > atol).sum()
            totals[1] = torch.maximum(totals[1], diff.max())
    later = Later(totals)

    def judge() -> Comparison:
        mismatched, max_abs = later.tolist()
        reason = _outside(mismatched, ref.numel(), tolerance, f"atol={atol}" if atol else "exact equality", max_abs)
        return Comparison(not reason, reason, float(max_abs), 0.0, mismatched)

    return judge
