"""The correctness comparison: tolerances, NaN/inf patterns, dtypes, shapes, integers exact."""

from __future__ import annotations

import torch

from runner.worker import compare
from runner.worker.compare import compare_outputs


def test_float_tolerance_and_nan_inf():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    assert compare_outputs([ref], [ref.clone()], None).ok
    assert not compare_outputs([ref], [torch.tensor([1.0, 0.0, float("inf"), -2.0])], None).ok
    assert not compare_outputs([ref], [torch.tensor([1.0, float("nan"), float("-inf"), -2.0])], None).ok
    assert not compare_outputs([ref], [torch.tensor([1.0, float("nan"), float("inf"), float("inf")])], None).ok
    near = ref.clone()
    near[0] += 5e-5
    assert compare_outputs([ref], [near], None).ok
    near[0] += 1e-3
    assert not compare_outputs([ref], [near], None).ok
    assert compare_outputs([ref], [near], {"atol": 1e-2}).ok


def test_exact_for_integers_and_strict_types():
    ints = torch.arange(10)
    assert compare_outputs([ints], [ints.clone()], None).ok
    off = ints.clone()
    off[3] += 1
    assert not compare_outputs([ints], [off], {"atol": 10, "rtol": 10}).ok
    assert not compare_outputs([ints], [ints.float()], None).ok
    assert not compare_outputs([ints], [ints[:-1]], None).ok
    assert not compare_outputs([ints], [ints, ints], None).ok


def test_chunked_comparison_sees_every_chunk(monkeypatch):
    monkeypatch.setattr(compare, "_CHUNK", 7)
    ref = torch.randn(100)
    got = ref.clone()
    got[97] += 1.0
    result = compare_outputs([ref], [got], None)
    assert not result.ok and result.mismatched == 1 and abs(result.max_abs_error - 1.0) < 1e-6
