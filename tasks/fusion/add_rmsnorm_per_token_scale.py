"""Residual add + RMSNorm + per-token absmax scaling to the fp8 range, without the cast (vLLM's dynamic-quant norm, quantless)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "rmsnorm", "residual", "quant-prep", "llama"],
    # perf: Llama-2-13B hidden 5120, 4 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 8192, "hidden": 5120},
    },
    "flops": "9 * tokens * hidden",
    "bytes": "4 * (4 * tokens * hidden + hidden + tokens)",
    "source": "vLLM rms_norm_dynamic_per_token_quant (fp8 e4m3 scale) before the cast",
}

FP8_E4M3_MAX = 448.0


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 1.0, 0.1)
        self.eps = eps

    def forward(self, x, residual):
        residual = x + residual
        y = residual * torch.rsqrt(residual.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        scale = y.abs().amax(-1, keepdim=True).clamp_min(1e-12) / FP8_E4M3_MAX
        return y / scale, scale, residual


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.float32),
        torch.randn(tokens, hidden, dtype=torch.float32),
    ]


def get_init_inputs(hidden):
    return [hidden]
