"""Lower-triangular solve L X = B (trsm) with a Cholesky-like factor, as in Shampoo/K-FAC preconditioning."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 1,
    "dtype": "float32",
    "tags": ["trsm", "solve", "optimizer"],
    # perf: whitening a 4096 x 4096 gradient block by a 4096 x 4096 factor (Llama-7B width,
    # Shampoo/K-FAC); 69 GFLOP, ~2-4 ms for cuBLAS trsm.
    "shapes": {
        "small": {"n": 64, "nrhs": 32},
        "perf": {"n": 4096, "nrhs": 4096},
    },
    "flops": "n * n * nrhs",
    "bytes": "4 * (n * n // 2 + 2 * n * nrhs)",
    # L has diagonal in [2, 3] and small off-diagonal entries (condition number ~2), so fp32
    # solves agree to ~1e-6 while a bf16 factor gives ~1e-2 errors.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "Shampoo / K-FAC preconditioner application",
}


class Model(nn.Module):
    def forward(self, factor, rhs):
        return torch.linalg.solve_triangular(factor, rhs, upper=False)


def get_inputs(n, nrhs):
    off = torch.tril(torch.randn(n, n, dtype=torch.float32), diagonal=-1) * (0.5 / n**0.5)
    factor = off + torch.diag(2.0 + torch.rand(n, dtype=torch.float32))
    return [factor, torch.randn(n, nrhs, dtype=torch.float32)]


def get_init_inputs():
    return []
