"""Gated group RMSNorm: RMSNorm over groups of y * silu(z), times a weight, the step between the SSM scan and out_proj in Mamba-2 (norm_before_gate=False)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["norm", "rmsnorm", "gating", "silu", "ssm", "mamba"],
    # perf: Mamba-Codestral-7B (d_inner 8192, n_groups 8 -> groups of 1024), 4 x 2048 tokens.
    # Eager in fp32: upcasts, silu, mul, square, mean, rsqrt, mul, weight, downcast: ~4.5 GB
    # moved, ~1.5 ms; ~1.5 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "d_inner": 256, "groups": 4},
        "perf": {"tokens": 8192, "d_inner": 8192, "groups": 8},
    },
    "flops": "10 * tokens * d_inner",
    "bytes": "2 * (3 * tokens * d_inner + d_inner)",
    "source": "mamba_ssm RMSNormGated (rms_norm_ref: fp32 math, group_size = d_ssm // ngroups, eps 1e-5), Mamba2 mixer",
}


class Model(nn.Module):
    def __init__(self, d_inner, groups, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_inner, dtype=torch.bfloat16))
        nn.init.normal_(self.weight, 1.0, 0.3)
        self.groups = groups
        self.eps = eps

    def forward(self, y, z):
        # y: the SSM scan output; z: the gate branch of in_proj.
        x = y.float() * torch.nn.functional.silu(z.float())
        g = x.view(*x.shape[:-1], self.groups, -1)
        g = g * torch.rsqrt(g.square().mean(-1, keepdim=True) + self.eps)
        return (g.view_as(x) * self.weight.float()).to(y.dtype)


def get_inputs(tokens, d_inner, groups):
    # Scan outputs differ in magnitude per group, so a norm over the whole row would be wrong.
    scale = (torch.rand(tokens, groups, 1, dtype=torch.float32) * 4 + 0.25).to(torch.bfloat16)
    y = (torch.randn(tokens, groups, d_inner // groups, dtype=torch.bfloat16) * scale).view(tokens, d_inner)
    return [y, torch.randn(tokens, d_inner, dtype=torch.bfloat16)]


def get_init_inputs(d_inner, groups):
    return [d_inner, groups]
