"""Per-token symmetric int8 fake quantization in fp32: absmax scale per row, divide, round, clamp to [-128, 127], rescale (W8A8 activation simulation)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["quantization", "fake-quant", "int8", "per-token", "reduction"],
    # perf: Llama-2-7B hidden 4096, 16384 tokens of activations quantized before the QKV GEMM
    # during SmoothQuant W8A8 calibration/evaluation. Eager: ~3 GB moved (~1 ms); peak ~1.1 GB.
    "shapes": {
        "small": {"tokens": 32, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 4096},
    },
    "flops": "6 * tokens * hidden",
    "bytes": "2 * 4 * tokens * hidden",
    "source": "SmoothQuant quantize_activation_per_token_absmax / torch fake_quantize (qmin -128, qmax 127)",
}


class Model(nn.Module):
    def forward(self, x):
        scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 127
        return (x / scale).round().clamp(-128, 127) * scale


def get_inputs(tokens, hidden):
    # Values sit within 0.3 of a grid point of their row's step s (never near a rounding tie, so
    # x / scale and x * (127 / amax) round alike); each row has one value at exactly +-127 s, so
    # amax = 127 s. Step sizes differ per token, as activation ranges do.
    step = torch.exp(torch.randn(tokens, 1, dtype=torch.float32)) * 0.01
    codes = torch.randint(-126, 127, (tokens, hidden), dtype=torch.int64).to(torch.float32)
    offsets = (torch.rand(tokens, hidden, dtype=torch.float32) - 0.5) * 0.6
    x = (codes + offsets) * step
    peak_col = torch.randint(0, hidden, (tokens, 1), dtype=torch.int64)
    peak_sign = torch.randint(0, 2, (tokens, 1), dtype=torch.int64).to(torch.float32) * 2 - 1
    return [x.scatter(1, peak_col, peak_sign * 127 * step)]


def get_init_inputs():
    return []
