"""Mamba's time-step activation delta = softplus(dt + dt_bias), a per-channel bias broadcast along the sequence then softplus."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 2,
    "dtype": "float32",
    "tags": ["pointwise", "broadcast", "ssm", "mamba"],
    # perf: Mamba-2.8B (d_inner 5120) in its [batch, d_inner, seqlen] layout, 32 x 2048 tokens.
    "shapes": {
        "small": {"batch": 2, "d_inner": 64, "seqlen": 128},
        "perf": {"batch": 32, "d_inner": 5120, "seqlen": 2048},
    },
    "flops": "4 * batch * d_inner * seqlen",
    "bytes": "4 * (2 * batch * d_inner * seqlen + d_inner)",
    "source": "Mamba selective scan delta_softplus",
}


class Model(nn.Module):
    def __init__(self, d_inner, dt_min=1e-3, dt_max=0.1):
        super().__init__()
        # Mamba's init: dt log-uniform in [dt_min, dt_max], stored as its inverse softplus.
        dt = torch.exp(torch.rand(d_inner) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, dt):
        return nn.functional.softplus(dt + self.dt_bias[:, None])


def get_inputs(batch, d_inner, seqlen):
    return [torch.randn(batch, d_inner, seqlen, dtype=torch.float32)]


def get_init_inputs(d_inner):
    return [d_inner]
