"""Stable row-wise argsort of weight-importance scores: Wanda pruning of a Llama-3-8B MLP projection."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["argsort", "sort", "pruning", "llama"],
    # perf: Llama-3-8B gate_proj scores |W| * ||X||, 14336 output rows x 4096 inputs.
    "shapes": {
        "small": {"rows": 16, "cols": 512},
        "perf": {"rows": 14336, "cols": 4096},
    },
    "flops": "rows * cols * log2(cols)",
    "bytes": "4 * rows * cols + 8 * rows * cols",
    "source": "Wanda (Sun et al. 2023): torch.sort(W_metric, dim=-1, stable=True) per output row",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores):
        # |randn| fp32 rows of 4096 hold ~0.2 exactly tied pairs each, so ties are ordered by a
        # stable sort (ascending index), as Wanda itself does.
        return torch.argsort(scores, dim=-1, stable=True)


def get_inputs(rows, cols):
    return [torch.randn(rows, cols, dtype=torch.float32).abs()]


def get_init_inputs():
    return []
