"""F.one_hot of int64 next-token labels over the Llama-3 vocabulary, the dense targets of soft-target cross-entropy."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "int64",
    "tags": ["one_hot", "labels", "vocab", "memory-bound"],
    # perf: 2048 tokens over the 128256-entry Llama-3 vocab: 2.1 GB of int64 written, ~0.7 ms; 2.1 GB.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1000},
        "perf": {"tokens": 2048, "vocab": 128256},
    },
    "flops": "0",
    "bytes": "8 * tokens + 8 * tokens * vocab",
    "source": "one-hot LM targets for label-smoothed / teacher-mixed cross-entropy (T5X/MaxText style)",
}


class Model(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, labels):
        return F.one_hot(labels, num_classes=self.vocab)


def get_inputs(tokens, vocab):
    return [torch.randint(0, vocab, (tokens,), dtype=torch.int64)]


def get_init_inputs(vocab):
    return [vocab]
