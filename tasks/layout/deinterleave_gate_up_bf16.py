"""Contiguous copies of the stride-2 gate and up views of an interleaved fused gate_up output (GPT-OSS MoE MLP)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["strided", "contiguous", "mlp", "memory-bound"],
    # perf: 65536 routed tokens through one GPT-OSS-120B expert projection (2 x 2880
    # interleaved): 755 MB read and written, ~1 ms eager.
    "shapes": {
        "small": {"tokens": 32, "intermediate": 48},
        "perf": {"tokens": 65536, "intermediate": 2880},
    },
    "flops": "0",
    "bytes": "2 * 2 * tokens * 2 * intermediate",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "GPT-OSS MLP: gate = x[..., ::2], up = x[..., 1::2]",
}


class Model(nn.Module):
    def forward(self, gate_up):
        return gate_up[..., ::2].contiguous(), gate_up[..., 1::2].contiguous()


def get_inputs(tokens, intermediate):
    return [torch.randn(tokens, 2 * intermediate, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
