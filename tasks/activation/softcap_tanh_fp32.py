"""Logit soft-capping cap * tanh(logits / cap) with cap 30, applied to Gemma-2's final vocabulary logits."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 2,
    "dtype": "float32",
    "tags": ["pointwise", "tanh", "logits", "gemma"],
    # perf: one 1024-token chunk of a chunked loss over Gemma-2's 256000-token vocabulary.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1024},
        "perf": {"tokens": 1024, "vocab": 256000},
    },
    "flops": "8 * tokens * vocab",
    "bytes": "2 * 4 * tokens * vocab",
    "source": "Gemma-2 final logit soft-capping",
}

CAP = 30.0


class Model(nn.Module):
    def forward(self, logits):
        return torch.tanh(logits / CAP) * CAP


def get_inputs(tokens, vocab):
    # Logits with std 10, so the cap bends a good share of them.
    return [torch.randn(tokens, vocab, dtype=torch.float32) * 10]


def get_init_inputs():
    return []
