"""Comparing a candidate's outputs with the reference's: shape, dtype, values.

Floating outputs use ``|a - b| <= atol + rtol * |b|`` elementwise with NaN where the
reference has NaN (and only there) and matching infinities; integer and bool outputs must
be exactly equal. The first failure is described in one line for the result record.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DEFAULT_TOLERANCE = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}


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


def compare_outputs(expected: list, actual: list, tolerance: dict | None) -> Comparison:
    """Compare two flat output lists; stops at the first output that differs."""
    if len(expected) != len(actual):
        return Comparison(False, f"returned {len(actual)} outputs, expected {len(expected)}")
    worst = Comparison(True)
    for index, (ref, got) in enumerate(zip(expected, actual)):
        result = _compare_one(ref, got, tolerance)
        if not result.ok:
            result.reason = f"output {index}: {result.reason}"
            return result
        worst.max_abs_error = max(worst.max_abs_error, result.max_abs_error)
        worst.max_rel_error = max(worst.max_rel_error, result.max_rel_error)
    return worst


def _compare_one(ref, got, tolerance: dict | None) -> Comparison:
    if not isinstance(ref, torch.Tensor):
        if ref == got:
            return Comparison(True)
        return Comparison(False, f"value {got!r} != expected {ref!r}")
    if type(got) is not torch.Tensor:
        return Comparison(False, f"is a {type(got).__name__}, expected a plain torch.Tensor")
    if got.shape != ref.shape:
        return Comparison(False, f"shape {tuple(got.shape)} != expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison(False, f"dtype {got.dtype} != expected {ref.dtype}")
    if got.device != ref.device:
        got = got.to(ref.device)
    if not ref.is_floating_point() and not ref.is_complex():
        mismatched = int((got != ref).sum())
        if mismatched:
            return Comparison(False, f"{mismatched} of {ref.numel()} integer elements differ", mismatched=mismatched)
        return Comparison(True)
    atol, rtol = tolerance_for(ref.dtype, tolerance)
    ref64 = ref.double()
    got64 = got.double()
    ref_nan = torch.isnan(ref64)
    got_nan = torch.isnan(got64)
    if not torch.equal(ref_nan, got_nan):
        count = int((ref_nan != got_nan).sum())
        return Comparison(False, f"NaN pattern differs at {count} elements", mismatched=count)
    finite = ~ref_nan
    ref_inf = torch.isinf(ref64) & finite
    if not torch.equal(ref64[ref_inf], got64[ref_inf]) or bool(torch.isinf(got64[~ref_inf & finite]).any()):
        return Comparison(False, "infinities differ")
    mask = finite & ~ref_inf
    diff = (got64 - ref64).abs()[mask]
    bound = atol + rtol * ref64.abs()[mask]
    bad = diff > bound
    max_abs = float(diff.max()) if diff.numel() else 0.0
    rel = diff / ref64.abs()[mask].clamp_min(1e-30)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    mismatched = int(bad.sum())
    if mismatched:
        return Comparison(
            False,
            f"{mismatched} of {ref.numel()} elements outside atol={atol:g} rtol={rtol:g} (max abs error {max_abs:.3g})",
            max_abs,
            max_rel,
            mismatched,
        )
    return Comparison(True, "", max_abs, max_rel, 0)
