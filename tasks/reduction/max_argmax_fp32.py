"""Max and int64 argmax over the vocabulary for every position: greedy predictions and token accuracy during LM evaluation."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "argmax", "logits"],
    # perf: 4 x 4096-token sequences over Llama-2's 32000-token vocabulary.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1024},
        "perf": {"tokens": 16384, "vocab": 32000},
    },
    "flops": "tokens * vocab",
    "bytes": "4 * tokens * vocab + 12 * tokens",
    "source": "Llama-2 greedy prediction / eval accuracy",
}


class Model(nn.Module):
    def forward(self, logits):
        values, indices = torch.max(logits, dim=-1)
        return values, indices


def get_inputs(tokens, vocab):
    return [torch.randn(tokens, vocab, dtype=torch.float32)]


def get_init_inputs():
    return []
