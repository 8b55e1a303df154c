"""Small-M bf16 GEMM (GEMV-like): the LM head of Llama-3-70B on a decode batch."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["gemv", "decode", "memory-bound", "llama"],
    # perf: 16 decode tokens through the Llama-3-70B LM head (8192 -> 128256); reading the
    # 2.1 GB weight dominates: ~0.9 ms eager on an H100.
    "shapes": {
        "small": {"batch": 4, "hidden": 64, "vocab": 500},
        "perf": {"batch": 16, "hidden": 8192, "vocab": 128256},
    },
    "flops": "2 * batch * hidden * vocab",
    "bytes": "2 * (batch * hidden + hidden * vocab + batch * vocab)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Llama-3-70B LM head at decode",
}


class Model(nn.Module):
    def __init__(self, hidden, vocab):
        super().__init__()
        self.lm_head = nn.Linear(hidden, vocab, bias=False, dtype=torch.bfloat16)

    def forward(self, x):
        return self.lm_head(x)


def get_inputs(batch, hidden):
    return [torch.randn(batch, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, vocab):
    return [hidden, vocab]
