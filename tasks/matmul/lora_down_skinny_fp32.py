"""Skinny fp32 GEMM x @ A^T with a rank-16 LoRA down-projection A, as in LoRA fine-tuning."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float32",
    "tags": ["gemm", "skinny", "lora", "memory-bound"],
    # perf: 16 sequences x 4096 tokens of Llama-70B width (8192) into a rank-16 adapter;
    # reading x (2.1 GB) dominates: ~1 ms eager on an H100.
    "shapes": {
        "small": {"tokens": 64, "hidden": 128, "rank": 4},
        "perf": {"tokens": 65536, "hidden": 8192, "rank": 16},
    },
    "flops": "2 * tokens * hidden * rank",
    "bytes": "4 * (tokens * hidden + rank * hidden + tokens * rank)",
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "LoRA adapter down-projection (Hu et al. 2021) on a Llama-70B layer",
}


class Model(nn.Module):
    def __init__(self, hidden, rank):
        super().__init__()
        self.lora_a = nn.Linear(hidden, rank, bias=False, dtype=torch.float32)

    def forward(self, x):
        return self.lora_a(x)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float32)]


def get_init_inputs(hidden, rank):
    return [hidden, rank]
