"""Sigmoid of gating logits, the elementwise output gate of gated attention (Qwen3-Next, "Gated Attention for LLMs")."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "gate", "attention"],
    # perf: Qwen3-Next gate width 16 heads x 256 = 4096, 16 sequences x 4096 tokens.
    "shapes": {
        "small": {"tokens": 64, "width": 256},
        "perf": {"tokens": 65536, "width": 4096},
    },
    "flops": "4 * tokens * width",
    "bytes": "2 * 4 * tokens * width",
    "source": "Qwen3-Next gated attention output gate",
}


class Model(nn.Module):
    def forward(self, logits):
        return torch.sigmoid(logits)


def get_inputs(tokens, width):
    return [torch.randn(tokens, width, dtype=torch.float32) * 2]


def get_init_inputs():
    return []
