"""Unbiased (n - 1) standard deviation over the hidden dimension of each fp32 token, the statistic of the Annotated-Transformer-style LayerNorm a * (x - mean) / (std + eps) + b."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "norm", "std"],
    # perf: hidden 4096, 32 sequences x 4096 tokens. Eager: one Welford kernel reading 2.1 GB
    # -> ~0.75 ms on an H100; 2.2 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 131072, "hidden": 4096},
    },
    "flops": "3 * tokens * hidden",
    "bytes": "4 * (tokens * hidden + tokens)",
    "source": "The Annotated Transformer LayerNorm (x.std(-1, keepdim=True), Bessel-corrected)",
}


class Model(nn.Module):
    def forward(self, x):
        return torch.std(x, dim=-1, correction=1)


def get_inputs(tokens, hidden):
    # Per-token scales in (0.1, 4) and offsets, as in a residual stream.
    scale = 0.1 + 3.9 * torch.rand(tokens, 1, dtype=torch.float32)
    offset = torch.randn(tokens, 1, dtype=torch.float32)
    return [torch.randn(tokens, hidden, dtype=torch.float32) * scale + offset]


def get_init_inputs():
    return []
