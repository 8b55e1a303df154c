"""Batched Cholesky factorisation of damped SPD covariance blocks, as in block-diagonal K-FAC / Shampoo preconditioners."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 1,
    "dtype": "float32",
    "tags": ["cholesky", "potrf", "batched", "optimizer"],
    # perf: 2048 blocks of 256 x 256 (the 256-wide diagonal blocks of the Kronecker factors of a
    # few Llama-7B layers); 11.5 GFLOP of batched potrf, a few ms eagerly; 1.1 GB of memory.
    "shapes": {
        "small": {"batch": 16, "n": 32},
        "perf": {"batch": 2048, "n": 256},
    },
    "flops": "batch * n * n * n // 3",
    "bytes": "4 * 2 * batch * n * n",
    # A = G G^T / (2n) + 0.5 I has eigenvalues in ~[0.6, 3.4] (condition number < 6), so fp32
    # factorisations in any order agree to ~1e-6 while bf16 inputs give ~1e-2 errors.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "K-FAC / Shampoo damped factor Cholesky (torch.linalg.cholesky)",
}


class Model(nn.Module):
    def forward(self, a):
        return torch.linalg.cholesky(a)


def get_inputs(batch, n):
    g = torch.randn(batch, n, 2 * n, dtype=torch.float32)
    a = g @ g.mT / (2 * n) + 0.5 * torch.eye(n, dtype=torch.float32)
    return [a]


def get_init_inputs():
    return []
