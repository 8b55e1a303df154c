"""Elementwise exp of max-subtracted attention scores, the softmax numerator in eager (unfused) attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "transcendental", "attention"],
    # perf: Llama-2-7B eager attention scores, 2 sequences x 32 heads x 2048 x 2048.
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64},
        "perf": {"batch": 2, "heads": 32, "seq": 2048},
    },
    "flops": "batch * heads * seq * seq",
    "bytes": "2 * 4 * batch * heads * seq * seq",
    "source": "Llama-2-7B eager attention softmax",
}


class Model(nn.Module):
    def forward(self, scores):
        return torch.exp(scores)


def get_inputs(batch, heads, seq):
    # Scores after subtracting the row max lie in (-8, 0].
    return [torch.rand(batch, heads, seq, seq, dtype=torch.float32) * -8.0]


def get_init_inputs():
    return []
