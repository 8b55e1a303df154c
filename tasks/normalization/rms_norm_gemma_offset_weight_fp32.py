"""Gemma RMSNorm in fp32: x * rsqrt(mean(x^2) + eps) scaled by (1 + weight), before every Gemma-2 attention and MLP."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["rmsnorm", "reduction", "gemma"],
    # perf: 16 sequences x 2048 tokens of Gemma-2-9B's 3584-wide hidden state (470 MB in, 470 MB
    # out); eager runs pow, mean, mul and mul over full-size tensors (~3.3 GB moved): ~1.1 ms on
    # an H100, ~1.9 GB of memory.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 32768, "hidden": 3584},
    },
    "flops": "5 * tokens * hidden",
    "bytes": "4 * (2 * tokens * hidden + hidden)",
    "source": "HF GemmaRMSNorm / Gemma2RMSNorm (output * (1.0 + weight.float()))",
}


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        # Gemma stores the offset from 1 (initialised to zero); trained offsets spread around 0.
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 0.0, 0.5)
        self.eps = eps

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return h * (1.0 + self.weight)


def get_inputs(tokens, hidden):
    # Tokens of different scales, as in a residual stream whose norm grows with depth.
    scale = torch.rand(tokens, 1, dtype=torch.float32) * 4 + 0.25
    return [torch.randn(tokens, hidden, dtype=torch.float32) * scale]


def get_init_inputs(hidden):
    return [hidden]
