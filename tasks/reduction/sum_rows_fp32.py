"""Row sums of exponentiated logits over the vocabulary, the softmax denominator (partition function) of a cross-entropy loss."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "loss"],
    # perf: 4096 tokens over Llama-3's 128256-token vocabulary.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1024},
        "perf": {"tokens": 4096, "vocab": 128256},
    },
    "flops": "tokens * vocab",
    "bytes": "4 * (tokens * vocab + tokens)",
    "source": "Llama-3 cross-entropy softmax denominator",
}


class Model(nn.Module):
    def forward(self, exp_logits):
        return exp_logits.sum(dim=-1)


def get_inputs(tokens, vocab):
    # exp(logit - max) lies in (0, 1]; per-token scales make the row sums differ widely.
    return [torch.rand(tokens, vocab, dtype=torch.float32) * torch.rand(tokens, 1, dtype=torch.float32)]


def get_init_inputs():
    return []
