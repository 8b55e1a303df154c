"""Elementwise erf of an fp32 MLP pre-activation scaled by 1/sqrt(2), the Gaussian-CDF core of exact GELU (GPT-NeoX, BERT)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "transcendental", "erf", "mlp"],
    # perf: GPT-NeoX-20B MLP width 24576 (exact-erf GELU), 8 sequences x 2048 tokens.
    # Eager: one erf kernel, 2 x 1.6 GB moved -> ~1.1 ms on an H100; 3.2 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "intermediate": 256},
        "perf": {"tokens": 16384, "intermediate": 24576},
    },
    "flops": "20 * tokens * intermediate",
    "bytes": "2 * 4 * tokens * intermediate",
    "source": "GPT-NeoX-20B gelu (0.5 * x * (1 + erf(x / sqrt(2))))",
}


class Model(nn.Module):
    def forward(self, x):
        return torch.erf(x)


def get_inputs(tokens, intermediate):
    # x / sqrt(2) of pre-activations with std ~1.4 covers both the linear and saturated ranges.
    return [torch.randn(tokens, intermediate, dtype=torch.float32)]


def get_init_inputs():
    return []
