"""Biased variance over the hidden dimension of each bf16 token, the second statistic of LayerNorm."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["reduction", "rows", "norm"],
    # perf: Falcon-40B hidden size 8192, 64 sequences x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 131072, "hidden": 8192},
    },
    "flops": "3 * tokens * hidden",
    "bytes": "2 * (tokens * hidden + tokens)",
    "source": "Falcon-40B LayerNorm statistics",
}


class Model(nn.Module):
    def forward(self, x):
        return torch.var(x, dim=-1, correction=0)


def get_inputs(tokens, hidden):
    # Per-token scales in (0, 4), as in a real residual stream, spread the variances over (0, 16).
    scale = torch.rand(tokens, 1, dtype=torch.bfloat16) * 4
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16) * scale]


def get_init_inputs():
    return []
