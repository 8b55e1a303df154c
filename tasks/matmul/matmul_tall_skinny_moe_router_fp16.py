"""Tall-skinny fp16 GEMM (M=65536, N=256): router logits of a 256-expert MoE layer such as DeepSeek-V3's gate."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float16",
    "tags": ["gemm", "tall-skinny", "moe", "router"],
    # perf: 65536 tokens (16 x 4096) of DeepSeek-V3 width (7168) into 256 routed experts;
    # 240 GFLOP (~0.4 ms at ~600 TFLOP/s) and 0.97 GB read (~0.3 ms): ~0.5-0.7 ms, 1 GB.
    "shapes": {
        "small": {"tokens": 256, "hidden": 128, "experts": 32},
        "perf": {"tokens": 65536, "hidden": 7168, "experts": 256},
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
