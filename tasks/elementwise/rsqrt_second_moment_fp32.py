"""Elementwise rsqrt of an optimizer's second-moment state, the 1/sqrt(v) preconditioner of Adam/RMSprop-style updates."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "optimizer"],
    # perf: the state of one Llama-2-70B MLP weight (intermediate 28672 x hidden 8192).
    "shapes": {
        "small": {"rows": 64, "cols": 256},
        "perf": {"rows": 28672, "cols": 8192},
    },
    "flops": "rows * cols",
    "bytes": "2 * 4 * rows * cols",
    "source": "Adam preconditioner on a Llama-2-70B MLP weight",
}


class Model(nn.Module):
    def forward(self, v):
        return torch.rsqrt(v)


def get_inputs(rows, cols):
    # Second moments of gradients: small and strictly positive.
    return [torch.rand(rows, cols, dtype=torch.float32) * 1e-4 + 1e-8]


def get_init_inputs():
    return []
