"""Squared ReLU relu(x)^2 over the bf16 MLP up-projection, the activation of Primer and of Nemotron-4's MLP."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "mlp", "relu", "primer"],
    # perf: Nemotron-4-15B MLP width 24576, 4 sequences x 4096 tokens. Eager: relu then square,
    # 4 x 805 MB moved -> ~1.1 ms on an H100; 2.4 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "intermediate": 256},
        "perf": {"tokens": 16384, "intermediate": 24576},
    },
    "flops": "2 * tokens * intermediate",
    "bytes": "2 * 2 * tokens * intermediate",
    "source": "Primer (So et al. 2021) squared ReLU; Nemotron-4 15B/340B activation",
}


class Model(nn.Module):
    def forward(self, x):
        return torch.square(torch.relu(x))


def get_inputs(tokens, intermediate):
    # Per-token scales in (0.5, 2.5), as in a real up-projection.
    scale = 0.5 + 2 * torch.rand(tokens, 1, dtype=torch.bfloat16)
    return [torch.randn(tokens, intermediate, dtype=torch.bfloat16) * scale]


def get_init_inputs():
    return []
