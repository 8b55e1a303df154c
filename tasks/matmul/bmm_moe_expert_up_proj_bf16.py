"""Batched bf16 expert GEMM [experts, tokens, hidden] @ [experts, hidden, inter]: the grouped up-projection of a MoE layer (Mixtral)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["bmm", "batched", "moe", "grouped-gemm"],
    # perf: Mixtral-8x7B w1 (4096 -> 14336) for 8 experts with 2048 tokens each (8192 tokens,
    # top-2 routing, balanced); 962 GFLOP, ~1.6 ms at ~600 TFLOP/s; 1.5 GB of inputs and output.
    "shapes": {
        "small": {"experts": 4, "tokens_per_expert": 16, "hidden": 64, "inter": 96},
        "perf": {"experts": 8, "tokens_per_expert": 2048, "hidden": 4096, "inter": 14336},
    },
    "flops": "2 * experts * tokens_per_expert * hidden * inter",
    "bytes": "2 * experts * (tokens_per_expert * hidden + hidden * inter + tokens_per_expert * inter)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Mixtral-8x7B expert MLP w1, tokens padded per expert",
}


class Model(nn.Module):
    def forward(self, x, w):
        return torch.bmm(x, w)


def get_inputs(experts, tokens_per_expert, hidden, inter):
    x = torch.randn(experts, tokens_per_expert, hidden, dtype=torch.bfloat16)
    # Outputs of std 0.5 stay mostly below 2, where one bf16 ulp is well inside rtol 1e-2.
    w = torch.randn(experts, hidden, inter, dtype=torch.bfloat16) * (0.5 / hidden**0.5)
    return [x, w]


def get_init_inputs():
    return []
