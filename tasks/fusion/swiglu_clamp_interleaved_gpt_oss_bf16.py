"""Clamped SwiGLU on an interleaved gate/up projection, (clamp(up) + 1) * g * sigmoid(1.702 g) with g = clamp(gate, max=7): GPT-OSS MoE experts."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["pointwise", "glu", "silu", "clamp", "moe", "gpt-oss"],
    # perf: GPT-OSS-120B experts (intermediate 2880, gate_up 5760 wide, interleaved), 4096 tokens
    # x top-4 = 16384 routed rows. Eager in fp32: ~10 kernels, ~4 GB moved, ~1.4 ms; ~1.2 GB.
    "shapes": {
        "small": {"rows": 64, "inter": 128},
        "perf": {"rows": 16384, "inter": 2880},
    },
    "flops": "8 * rows * inter",
    "bytes": "2 * (2 * rows * inter + rows * inter)",
    "source": "GPT-OSS experts (alpha 1.702, swiglu_limit 7.0, interleaved gate_up); fp32 math as vLLM swigluoai_and_mul",
}

ALPHA = 1.702
LIMIT = 7.0


class Model(nn.Module):
    def forward(self, gate_up):
        # Computed in fp32 and rounded once, as vLLM's fused kernel does (HF eager rounds each step).
        gate, up = gate_up[..., ::2].float(), gate_up[..., 1::2].float()
        gate = gate.clamp(min=None, max=LIMIT)
        up = up.clamp(min=-LIMIT, max=LIMIT)
        glu = gate * torch.sigmoid(gate * ALPHA)
        return ((up + 1) * glu).to(gate_up.dtype)


def get_inputs(rows, inter):
    # Spread 4 so that ~8% of the values exceed the +-7 clamp, as in trained experts' tails.
    return [torch.randn(rows, 2 * inter, dtype=torch.bfloat16) * 4]


def get_init_inputs():
    return []
