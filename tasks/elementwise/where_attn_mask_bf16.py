"""torch.where with a bool mask broadcast over heads, filling masked attention scores with the dtype's minimum (eager attention masking)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "broadcast", "mask", "attention"],
    # perf: Llama-2-7B eager attention scores, 4 sequences x 32 heads x 2048 x 2048.
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64},
        "perf": {"batch": 4, "heads": 32, "seq": 2048},
    },
    "flops": "batch * heads * seq * seq",
    "bytes": "2 * 2 * batch * heads * seq * seq + batch * seq * seq",
    "source": "Hugging Face eager attention mask fill",
}


class Model(nn.Module):
    def forward(self, scores, keep):
        return torch.where(keep, scores, torch.finfo(scores.dtype).min)


def get_inputs(batch, heads, seq):
    # A random keep pattern (shared by all heads) stands in for padding and causal masks.
    return [
        torch.randn(batch, heads, seq, seq, dtype=torch.bfloat16),
        torch.rand(batch, 1, seq, seq, dtype=torch.float32) < 0.8,
    ]


def get_init_inputs():
    return []
