"""torch.cat of low, middle and high target-layer hidden states along the hidden dim (EAGLE-3 draft-head input)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float16",
    "tags": ["concat", "speculative-decoding", "memory-bound"],
    # perf: 32768 tokens of Llama-3.1-8B hidden states (4096) from 3 layers: 805 MB read and
    # written, ~0.55 ms; 1.6 GB.
    "shapes": {
        "small": {"tokens": 16, "hidden": 24},
        "perf": {"tokens": 32768, "hidden": 4096},
    },
    "flops": "0",
    "bytes": "2 * 2 * 3 * tokens * hidden",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "EAGLE-3 feature fusion: cat([h_low, h_mid, h_high], dim=-1) before the fc layer",
}


class Model(nn.Module):
    def forward(self, low, mid, high):
        return torch.cat([low, mid, high], dim=-1)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
