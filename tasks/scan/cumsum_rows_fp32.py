"""Cumulative sum of probabilities along the vocabulary, the cumulative mass of top-p (nucleus) sampling."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "float32",
    "tags": ["scan", "rows", "sampling"],
    # perf: 2048 RL rollout sequences (256 prompts x 8 samples) over Llama-3's 128256 vocabulary.
    "shapes": {
        "small": {"rows": 16, "vocab": 1024},
        "perf": {"rows": 2048, "vocab": 128256},
    },
    "flops": "rows * vocab",
    "bytes": "2 * 4 * rows * vocab",
    "source": "Top-p sampling cumulative probabilities",
}


class Model(nn.Module):
    def forward(self, probs):
        return torch.cumsum(probs, dim=-1)


def get_inputs(rows, vocab):
    # Unnormalised probabilities exp(logits): positive and heavy-tailed.
    return [torch.randn(rows, vocab, dtype=torch.float32).exp()]


def get_init_inputs():
    return []
