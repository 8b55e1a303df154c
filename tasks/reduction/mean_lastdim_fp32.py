"""Mean over the hidden dimension of each token, the first statistic of LayerNorm (Falcon-40B)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "norm"],
    # perf: Falcon-40B hidden size 8192, 32 sequences x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 65536, "hidden": 8192},
    },
    "flops": "tokens * hidden",
    "bytes": "4 * (tokens * hidden + tokens)",
    "source": "Falcon-40B LayerNorm statistics",
}


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=-1)


def get_inputs(tokens, hidden):
    # Per-token offsets, as in a real residual stream, keep the means of order one.
    return [torch.randn(tokens, hidden, dtype=torch.float32) + torch.randn(tokens, 1, dtype=torch.float32)]


def get_init_inputs():
    return []
