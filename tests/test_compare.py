"""The correctness comparison: tolerances, NaN/inf patterns, dtypes, shapes, integers exact."""

from __future__ import annotations

import torch

from runner.worker import compare
from runner.worker.compare import compare_outputs
from tests.conftest import count_host_reads


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
    assert not compare_outputs([ints], [off], None).ok
    assert not compare_outputs([ints], [off], {"atol": 0.5, "rtol": 10}).ok  # rtol means nothing for integers
    assert compare_outputs([ints], [off], {"atol": 1}).ok
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


def test_mismatch_fraction_allows_few_ties_never_many():
    ref = torch.randint(-100, 100, (1000,), dtype=torch.int8)
    contract = {"mismatch_fraction": 0.005}
    ties = ref.clone()
    ties[:5] += 1  # 5 of 1000 one off: allowed
    assert compare_outputs([ref], [ties], contract).ok
    many = ref.clone()
    many[:6] += 1
    result = compare_outputs([ref], [many], contract)
    assert not result.ok and result.mismatched == 6 and "at most 5 allowed" in result.reason
    far = ref.clone()
    far[0] += 20  # one element far off: outside any atol, inside the fraction
    assert not compare_outputs([ref], [far], {"atol": 1}).ok
    assert compare_outputs([ref], [far], contract).ok
    assert compare_outputs([ref], [many], {"atol": 1}).ok
    assert compare_outputs([ref], [torch.zeros_like(ref)], contract).ok is False
    floats = torch.randn(1000)
    one_off = floats.clone()
    one_off[0] += 1.0
    assert not compare_outputs([floats], [one_off], None).ok
    assert compare_outputs([floats], [one_off], {"mismatch_fraction": 0.001}).ok
    nan = floats.clone()
    nan[0] = float("nan")
    assert not compare_outputs([floats], [nan], {"mismatch_fraction": 0.001}).ok  # NaN patterns stay exact


def test_complex_outputs_compare_their_imaginary_parts():
    """A complex output that differs only in its imaginary part is wrong (the comparison once cast
    complex values to float64, which drops the imaginary part)."""
    ref = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    assert compare_outputs([ref], [ref.clone()], None).ok
    assert not compare_outputs([ref], [torch.tensor([1 + 2j, 3 + 1j], dtype=torch.complex64)], None).ok
    off = compare_outputs([ref], [torch.tensor([1 + 2j, 3 - 1.5j], dtype=torch.complex64)], None)
    assert not off.ok and off.max_abs_error == 0.5


def test_half_precision_bounds_and_errors_match_a_float64_judgement():
    """16-bit outputs are judged in float32: the same elements fall outside the bound as in float64,
    and the reported errors agree, over many random pairs and every chunk."""
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16):
        ref = torch.randn(4096, generator=generator).to(dtype)
        got = (ref.float() * (1 + 0.02 * torch.randn(4096, generator=generator))).to(dtype)
        r, g = ref.double(), got.double()
        diff = (g - r).abs()
        expected = int((diff > 1e-2 + 1e-2 * r.abs()).sum())
        result = compare_outputs([ref], [got], None)
        assert result.mismatched == expected > 0
        assert result.max_abs_error == float(diff.max())


def test_comparison_reads_back_a_fixed_number_of_values_however_many_chunks(monkeypatch):
    """On a GPU every value read back waits for the device: the comparison once read five per
    chunk, which was most of a reference evaluation's correctness stage on the H100. Now the
    counts and maxima stay on the device: two reads per floating output, one per integer output,
    for one chunk or many."""
    for chunk in (1 << 24, 7):
        monkeypatch.setattr(compare, "_CHUNK", chunk)
        ref = torch.randn(100)
        with count_host_reads() as reads:
            assert compare_outputs([ref], [ref.clone()], None).ok
        assert reads.count == 2
        with count_host_reads() as reads:
            assert compare_outputs([torch.arange(100)], [torch.arange(100)], None).ok
        assert reads.count == 1
