"""Residual add of two bf16 hidden-state tensors (h = x + block_out), after every attention and MLP block of a transformer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "residual", "llama"],
    # perf: 8 sequences x 4096 tokens at Llama-2-70B's hidden size 8192.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 32768, "hidden": 8192},
    },
    "flops": "tokens * hidden",
    "bytes": "3 * 2 * tokens * hidden",
    "source": "Llama-2-70B residual connection",
}


class Model(nn.Module):
    def forward(self, x, block_out):
        return x + block_out


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.bfloat16),
        torch.randn(tokens, hidden, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return []
