"""Gram-matrix statistic update R <- beta R + (1 - beta) G^T G of the Shampoo optimizer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 2,
    "dtype": "float32",
    "tags": ["gram", "syrk", "optimizer"],
    # perf: right statistic of a Llama-7B up_proj gradient (11008 x 4096); 369 GFLOP for
    # G^T G, ~7.5 ms at ~50 TFLOP/s fp32.
    "shapes": {
        "small": {"rows": 96, "cols": 64},
        "perf": {"rows": 11008, "cols": 4096},
    },
    "flops": "2 * rows * cols * cols + 3 * cols * cols",
    "bytes": "4 * (rows * cols + 2 * cols * cols)",
    # G is scaled by rows**-0.25 so off-diagonal entries of G^T G are O(1): fp32 reorderings
    # of the K=11008 sum stay near 1e-5, bf16 fails.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "Shampoo preconditioner statistics (Gupta et al. 2018; distributed Shampoo)",
}


class Model(nn.Module):
    def __init__(self, beta):
        super().__init__()
        self.beta = beta

    def forward(self, grad, stat):
        return self.beta * stat + (1.0 - self.beta) * (grad.t() @ grad)


def get_inputs(rows, cols):
    grad = torch.randn(rows, cols, dtype=torch.float32) * rows**-0.25
    stat = torch.randn(cols, cols, dtype=torch.float32)
    return [grad, stat + stat.t()]


def get_init_inputs():
    return [0.95]
