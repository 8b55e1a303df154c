"""Running maximum (values only) along the sequence of bf16 hidden states, causal max-pooling that gives every prefix a pooled representation in streaming sequence encoders."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["scan", "sequence", "max", "pooling"],
    # perf: 8 sequences x 4096 tokens at hidden 4096. Eager torch.cummax also writes int64
    # indices: (2 + 2 + 8) x 134M bytes -> ~0.55 ms on an H100; 1.6 GB of GPU memory.
    "shapes": {
        "small": {"batch": 2, "seq": 64, "hidden": 32},
        "perf": {"batch": 8, "seq": 4096, "hidden": 4096},
    },
    "flops": "batch * seq * hidden",
    "bytes": "2 * 2 * batch * seq * hidden",
    "source": "Causal max-pool readout (torch.cummax(h, dim=seq).values)",
}


class Model(nn.Module):
    def forward(self, hidden):
        return torch.cummax(hidden, dim=1).values


def get_inputs(batch, seq, hidden):
    # A downward drift along the sequence keeps the running max changing instead of saturating.
    drift = torch.linspace(0, -6, seq, dtype=torch.bfloat16)[:, None]
    return [torch.randn(batch, seq, hidden, dtype=torch.bfloat16) + drift]


def get_init_inputs():
    return []
