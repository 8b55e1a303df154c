"""Tasks whose numerics contracts must admit every honest implementation (false positives found on the H100).

torch_compile over the full suite on the H100 ended three honest evaluations ``incorrect``: two
int8 quantizations held to exact equality, where Inductor's code rounds a few values at .5
boundaries the other way, and the Lion step, whose inputs had a few exact sign ties. The CUDA
random generator is the boundary that cannot run here: the Lion test replaces ``torch.randn`` by
a test double that returns exact zeros at fixed places, as CUDA's generator does now and then
(H100: 127 and 131 in 2^30 draws; the CPU's, 17 in 2^28, too rarely for a small test to see).
"""

from __future__ import annotations

import pytest
import torch

from runner.paths import TASKS_DIR
from runner.worker.compare import compare_outputs
from runner.worker.loading import import_file

QUANTIZERS = ["quantize_int8_per_token_dynamic_bf16", "quantize_int8_kv_cache_per_head_bf16"]


def _task(name: str):
    path = next(TASKS_DIR.glob(f"*/{name}.py"))
    return import_file(path, f"contract_{name}")


def _by_reciprocal(model):
    """The task's quantization computed as production kernels do it: x * (1 / scale), in fp32."""

    def quantize(x):
        x = x.float()
        scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
        return (x * (1.0 / scale)).round().clamp(-127, 127).to(torch.int8), scale

    def run(*inputs):
        outputs = []
        for x in inputs:
            q, scale = quantize(x)
            outputs += [q, scale if x.dim() == 2 else scale.squeeze(-1)]
        return outputs

    return run


@pytest.mark.parametrize("name", QUANTIZERS)
def test_quantization_admits_reciprocal_rounding_and_refuses_truncation(name):
    module = _task(name)
    dims = module.KBENCH["shapes"]["small"]
    tolerance = module.KBENCH["tolerance"]
    torch.manual_seed(0)
    inputs = module.get_inputs(**dims)
    expected = list(module.Model()(*inputs))
    honest = _by_reciprocal(module)(*inputs)
    assert [t.dtype for t in honest] == [t.dtype for t in expected]
    assert compare_outputs(expected, honest, tolerance).ok
    truncated = [t.clone() for t in expected]
    x = inputs[0].float()
    scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
    truncated[0] = (x / scale).trunc().clamp(-127, 127).to(torch.int8)  # rounds toward zero: wrong
    assert not compare_outputs(expected, truncated, tolerance).ok


def test_lion_inputs_have_no_sign_ties_when_the_generator_returns_zeros(monkeypatch):
    module = _task("lion_step")
    real_randn = torch.randn

    def randn_with_exact_zeros(*args, **kwargs):  # test double for CUDA's generator
        values = real_randn(*args, **kwargs)
        values.view(-1)[::97] = 0.0
        return values

    monkeypatch.setattr(torch, "randn", randn_with_exact_zeros)
    torch.manual_seed(0)
    _, grad, exp_avg = module.get_inputs(numel=1 << 16)
    interpolation = exp_avg * module.BETA1 + grad * (1 - module.BETA1)
    assert float(interpolation.abs().min()) >= 0.9e-3
