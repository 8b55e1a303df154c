"""Batched solves of small well-conditioned dense systems A X = B, as in per-head test-time-regression layers."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 1,
    "dtype": "float32",
    "tags": ["solve", "lu", "batched"],
    # perf: 4096 systems (8 sequences x 32 heads x 16 chunks) of size 64 = head_dim with 64
    # right-hand sides, as in chunked MesaNet/DeltaNet-style layers; 11 GFLOP of batched LU
    # and triangular solves, a few ms eagerly.
    "shapes": {
        "small": {"batch": 16, "n": 16, "nrhs": 8},
        "perf": {"batch": 4096, "n": 64, "nrhs": 64},
    },
    "flops": "batch * (2 * n * n * n // 3 + 2 * n * n * nrhs)",
    "bytes": "4 * batch * (n * n + 2 * n * nrhs)",
    # A = I + E with ||E|| <~ 0.6 (condition number < 5): fp32 solvers agree to ~1e-6.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "batched per-head linear solves (MesaNet-style test-time regression)",
}


class Model(nn.Module):
    def forward(self, a, b):
        return torch.linalg.solve(a, b)


def get_inputs(batch, n, nrhs):
    a = torch.eye(n, dtype=torch.float32) + torch.randn(batch, n, n, dtype=torch.float32) * (0.3 / n**0.5)
    return [a, torch.randn(batch, n, nrhs, dtype=torch.float32)]


def get_init_inputs():
    return []
