"""Small-M bf16 GEMM for a decode batch of 8 tokens: the fused gate+up projection of Mistral-Large-2 (123B)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["gemm", "decode", "small-m", "memory-bound", "mistral"],
    # perf: 8 decode tokens through the Mistral-Large-2 fused gate_up_proj (12288 -> 2 x 28672);
    # reading the 1.4 GB weight dominates: ~0.5 ms at ~3 TB/s, 1.4 GB of memory.
    "shapes": {
        "small": {"batch": 8, "hidden": 256, "d_out": 192},
        "perf": {"batch": 8, "hidden": 12288, "d_out": 57344},
    },
    "flops": "2 * batch * hidden * d_out",
    "bytes": "2 * (batch * hidden + hidden * d_out + batch * d_out)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Mistral-Large-Instruct-2407 MLP gate_up_proj (vLLM merged column-parallel) at decode batch 8",
}


class Model(nn.Module):
    def __init__(self, hidden, d_out):
        super().__init__()
        self.gate_up_proj = nn.Linear(hidden, d_out, bias=False, dtype=torch.bfloat16)

    def forward(self, x):
        return self.gate_up_proj(x)


def get_inputs(batch, hidden):
    return [torch.randn(batch, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, d_out):
    return [hidden, d_out]
