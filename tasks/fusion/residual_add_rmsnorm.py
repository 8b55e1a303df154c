"""Residual add then RMSNorm, returning the normed output and the new residual (vLLM fused_add_rms_norm)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "rmsnorm", "residual", "llama"],
    # perf: Llama-3-8B hidden 4096, a prefill batch of 8 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 4096},
    },
    "flops": "6 * tokens * hidden",
    "bytes": "4 * (4 * tokens * hidden + hidden)",
    "source": "Llama decoder layer: residual add + input/post-attention RMSNorm",
}


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 1.0, 0.1)
        self.eps = eps

    def forward(self, x, residual):
        residual = x + residual
        variance = residual.pow(2).mean(-1, keepdim=True)
        return residual * torch.rsqrt(variance + self.eps) * self.weight, residual


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.float32),
        torch.randn(tokens, hidden, dtype=torch.float32),
    ]


def get_init_inputs(hidden):
    return [hidden]
