"""Tall-skinny fp16 GEMM (M=131072, N=256): router logits of a 256-expert MoE layer such as DeepSeek-V3's gate."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float16",
    "tags": ["gemm", "tall-skinny", "moe", "router"],
    # perf: 131072 tokens (32 x 4096) of DeepSeek-V3 width (7168) into 256 routed experts;
    # 480 GFLOP and 1.9 GB read: ~0.8 ms on an H100 (65536 tokens measured 0.39 ms), 2 GB.
    "shapes": {
        "small": {"tokens": 256, "hidden": 128, "experts": 32},
        "perf": {"tokens": 131072, "hidden": 7168, "experts": 256},
    },
    "flops": "2 * tokens * hidden * experts",
    "bytes": "2 * (tokens * hidden + hidden * experts + tokens * experts)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "DeepSeek-V3 MoE gate (7168 -> 256 experts) over a training micro-batch",
}


class Model(nn.Module):
    def forward(self, x, gate_weight):
        return x @ gate_weight.t()


def get_inputs(tokens, hidden, experts):
    x = torch.randn(tokens, hidden, dtype=torch.float16)
    gate_weight = torch.randn(experts, hidden, dtype=torch.float16) / hidden**0.5
    return [x, gate_weight]


def get_init_inputs():
    return []
