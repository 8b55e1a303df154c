"""The fused comparison and float64 error (``runner/worker/fused_checks.py``) against the PyTorch paths.

On this machine the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, in a subprocess: the
variable must be set before Triton is imported); on a GPU, compiled (``test_gpu.py``). Every case
must give the same counts and maxima bit for bit, and the same sums to the last few bits (another
summation order).
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

from runner.worker.compare import compare_outputs
from tests.conftest import prepare_in_own_caches, run_kernel_script

pytest.importorskip("triton")

AGREEMENT = r"""
import json, sys
import torch
from runner.worker import compare, fused_checks, precision
device = sys.argv[1]
torch.manual_seed(0)
cases = []
for n in (0, 1, 15, 1024, 3000):
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        r = torch.randn(n, device=device).to(dtype)
        g = (r.double() + 1e-3 * torch.randn(n, device=device, dtype=torch.float64)).to(dtype)
        if n > 20:  # NaN and infinities where both have them, one NaN and one infinity where only one does, a zero
            r[3] = g[3] = float("nan"); r[7] = g[7] = float("inf"); r[8] = g[8] = float("-inf"); r[11] = 0.0
            if n > 1024:
                g[9] = float("nan"); g[13] = float("-inf"); g[2000] = r[2000] + 1.0
        atol, rtol = compare.tolerance_for(dtype, None)
        fused, torch_path = fused_checks.queue_compare_counts(r, g, atol, rtol)(), compare._queue_counts(r, g, atol, rtol)()
        sums = (fused_checks.squared_sums(g.float(), r.double()), precision._torch_squared_sums(g.float(), r.double()))
        cases.append({"n": n, "dtype": str(dtype), "fused": fused, "torch": torch_path, "sums": sums})
print(json.dumps(cases))
"""


def _agreement(device: str) -> list[dict]:
    return json.loads(run_kernel_script(AGREEMENT, device, timeout=600))


def check_agreement(device: str) -> None:
    cases = _agreement(device)
    assert len(cases) == 20
    for case in cases:
        assert case["fused"] == case["torch"], case
        (error, norm), (error_t, norm_t) = case["sums"]
        assert math.isclose(error, error_t, rel_tol=1e-12, abs_tol=1e-300), case
        assert math.isclose(norm, norm_t, rel_tol=1e-12, abs_tol=1e-300), case
    assert any(case["fused"][0] and case["fused"][1] and case["fused"][2] for case in cases)  # every count ran
    assert all(math.isfinite(case["fused"][4]) for case in cases)


def test_fused_kernels_agree_with_pytorch_in_the_interpreter():
    check_agreement("cpu")


def test_relative_maximum_ignores_where_the_reference_is_nan():
    """Regression: a NaN the candidate matches made the relative maximum NaN (0 / NaN), and the result JSON carried it."""
    ref = torch.tensor([1.0, float("nan"), 2.0, float("inf")])
    got = torch.tensor([1.0 + 1e-6, float("nan"), 2.0, float("inf")])
    result = compare_outputs([ref], [got], None)
    assert result.ok
    assert math.isfinite(result.max_rel_error) and result.max_rel_error == pytest.approx(2**-20)  # 1 + 1e-6 in float32


def test_check_kernels_have_a_cache_of_their_own(tmp_path, monkeypatch):
    """A candidate writes into the run's Triton cache (its kernels compile there); the kernels that judge
    the next candidates compile into and load from another directory, and only while they do."""
    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor
    from runner.worker import fused_checks
    from runner.worker.protocol import CHECKS_CACHE_ENV

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    env = LocalExecutor(ExecutorSettings(cache_dir=tmp_path)).child_env(tmp_path / "home", None)
    assert env["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert env[CHECKS_CACHE_ENV] == str(tmp_path / "user" / "kbench" / "checks")  # kept from run to run

    monkeypatch.setenv("TRITON_CACHE_DIR", "/candidates")
    monkeypatch.setenv(CHECKS_CACHE_ENV, "/checks")
    with fused_checks.checks_cache():
        assert os.environ["TRITON_CACHE_DIR"] == "/checks"
    assert os.environ["TRITON_CACHE_DIR"] == "/candidates"
    monkeypatch.delenv("TRITON_CACHE_DIR")
    with pytest.raises(RuntimeError), fused_checks.checks_cache():
        raise RuntimeError("a failing compile")
    assert "TRITON_CACHE_DIR" not in os.environ  # restored to unset, even after an error


@pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without a CUDA device")
def test_without_a_gpu_the_checks_stay_on_pytorch():
    """No CUDA device: ``prepare`` says why it did nothing, and nothing is judged by the kernels."""
    from runner.worker import fused_checks

    assert fused_checks.prepare() == {"not done": "no Triton or no CUDA device"}
    assert not fused_checks.available(torch.ones(3))


PREPARE = r"""
import json, torch
from runner.worker import fused_checks
output = torch.ones(4, device="cuda")
before = fused_checks.available(output)
variants = fused_checks.prepare()
print(json.dumps({"variants": variants, "available": [before, fused_checks.available(output)]}))
"""


def check_prepare_fills_its_own_cache(tmp_path) -> None:
    """On a GPU: ``prepare()`` compiles every variant, host only, into ``KBENCH_CHECKS_CACHE`` and nothing
    into the candidates' ``TRITON_CACHE_DIR``; the kernels judge outputs from then on, not before."""
    answer, checks, candidates = prepare_in_own_caches(PREPARE, tmp_path)
    assert answer["available"] == [False, True]  # used only once prepared: unprepared, PyTorch's ops cost less
    variants = answer["variants"]
    assert len(variants) == 7 and all(isinstance(seconds, float) for seconds in variants.values()), variants
    assert list(checks.rglob("*.cubin"))
    assert not list(candidates.rglob("*.cubin"))


def test_failed_variants_are_the_ones_not_timed():
    """The one verdict on a ``prepare``: every variant compiled only where each has its seconds."""
    from runner.worker.fused_checks import failed_variants

    assert failed_variants({"compare float32": 0.12, "sum pairs": 0.03}) == {}
    failed = {"not done": "no Triton or no CUDA device"}
    assert failed_variants({"compare float32": 0.12, **failed}) == failed
