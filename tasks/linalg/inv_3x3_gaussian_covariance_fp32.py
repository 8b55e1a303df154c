"""Batched inverses of well-conditioned 3x3 covariance matrices (per-Gaussian precision matrices in 3D Gaussian splatting / GMMs)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 1,
    "dtype": "float32",
    "tags": ["inverse", "batched", "small-matrix", "3d"],
    # perf: 4M Gaussians (a typical 3D Gaussian splatting scene has 1-6M); 151 MB in and out;
    # torch.linalg.inv runs batched LU + solves against an identity: a few ms, ~0.7 GB.
    "shapes": {
        "small": {"batch": 256},
        "perf": {"batch": 4194304},
    },
    "flops": "batch * 3 * 3 * 3 * 2",
    "bytes": "4 * 2 * batch * 3 * 3",
    # Sigma = M M^T / 3 + 0.5 I has condition number ~< 20: fp32 LU and closed-form (adjugate)
    # inverses agree to ~1e-6, while bf16 inputs give ~1e-2 errors.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "3D Gaussian splatting / Gaussian mixture precision matrices (torch.linalg.inv)",
}


class Model(nn.Module):
    def forward(self, cov):
        return torch.linalg.inv(cov)


def get_inputs(batch):
    m = torch.randn(batch, 3, 3, dtype=torch.float32)
    return [m @ m.mT / 3 + 0.5 * torch.eye(3, dtype=torch.float32)]


def get_init_inputs():
    return []
