"""Residual add then LayerNorm, returning the normed output and the new residual (pre-LN GPT-NeoX blocks)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "layernorm", "residual"],
    # perf: GPT-NeoX-20B hidden 6144, 8 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 6144},
    },
    "flops": "9 * tokens * hidden",
    "bytes": "4 * (4 * tokens * hidden + 2 * hidden)",
    "source": "GPT-NeoX pre-LN block (fused add + LayerNorm, prenorm=True)",
}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.norm.weight, 1.0, 0.1)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)

    def forward(self, x, residual):
        residual = x + residual
        return self.norm(residual), residual


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.float32),
        torch.randn(tokens, hidden, dtype=torch.float32),
    ]


def get_init_inputs(hidden):
    return [hidden]
