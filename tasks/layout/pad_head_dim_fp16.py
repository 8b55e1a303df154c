"""Zero-pad attention head_dim 80 to 128 for attention kernels that need a power-of-two head size (Phi-2)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float16",
    "tags": ["pad", "attention", "memory-bound"],
    # perf: 64 x 2048 tokens of Phi-2 (32 heads x 80): 671 MB read, 1.07 GB written, ~1.3 ms eager.
    "shapes": {
        "small": {"tokens": 32, "heads": 4, "head_dim": 80, "padded_dim": 128},
        "perf": {"tokens": 131072, "heads": 32, "head_dim": 80, "padded_dim": 128},
    },
    "flops": "0",
    "bytes": "2 * tokens * heads * (head_dim + padded_dim)",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Phi-2 attention with head_dim 80 padded to 128",
}


class Model(nn.Module):
    def __init__(self, head_dim, padded_dim):
        super().__init__()
        self.extra = padded_dim - head_dim

    def forward(self, x):
        return F.pad(x, (0, self.extra))


def get_inputs(tokens, heads, head_dim):
    return [torch.randn(tokens, heads, head_dim, dtype=torch.float16)]


def get_init_inputs(head_dim, padded_dim):
    return [head_dim, padded_dim]
