"""Elementwise log of probabilities, the log(p_teacher) term of a knowledge-distillation KL loss over the vocabulary."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "transcendental", "loss"],
    # perf: 4 x 2048-token sequences over Mistral-7B / Llama-2's 32000-token vocabulary.
    "shapes": {
        "small": {"tokens": 64, "vocab": 256},
        "perf": {"tokens": 8192, "vocab": 32000},
    },
    "flops": "tokens * vocab",
    "bytes": "2 * 4 * tokens * vocab",
    "source": "Distillation KL loss on Mistral-7B logits",
}


class Model(nn.Module):
    def forward(self, probs):
        return torch.log(probs)


def get_inputs(tokens, vocab):
    # Strictly positive, like probabilities.
    return [torch.rand(tokens, vocab, dtype=torch.float32) + 1e-6]


def get_init_inputs():
    return []
