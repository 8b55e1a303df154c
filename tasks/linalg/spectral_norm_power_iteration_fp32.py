"""One power iteration and W / sigma, the forward of torch's spectral_norm parametrization (GANs, Lipschitz nets)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "linalg",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemv", "power-iteration", "normalization", "memory-bound"],
    # perf: a Llama-70B up_proj-sized weight (28672 x 8192, 0.94 GB); W is read three times by
    # matrix-vector products and once more by the division: ~4.7 GB moved eagerly, ~1.6 ms.
    "shapes": {
        "small": {"rows": 96, "cols": 64},
        "perf": {"rows": 28672, "cols": 8192},
    },
    "flops": "7 * rows * cols",
    "bytes": "4 * (2 * rows * cols + cols)",
    # Entries of W / sigma are ~1e-2, so atol is scaled down with them; rtol 1e-4 as for fp32.
    "tolerance": {"atol": 1e-6, "rtol": 1e-4},
    "source": "torch.nn.utils.parametrizations.spectral_norm (Miyato et al. 2018)",
}


class Model(nn.Module):
    def forward(self, weight, v):
        u = F.normalize(torch.mv(weight, v), dim=0, eps=1e-12)
        v = F.normalize(torch.mv(weight.t(), u), dim=0, eps=1e-12)
        sigma = torch.dot(u, torch.mv(weight, v))
        return weight / sigma


def get_inputs(rows, cols):
    weight = torch.randn(rows, cols, dtype=torch.float32) / cols**0.5
    return [weight, torch.randn(cols, dtype=torch.float32)]


def get_init_inputs():
    return []
