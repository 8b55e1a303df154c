"""GELU with the tanh approximation, as in GPT-2/GPT-NeoX MLPs, over an activation tensor."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "mlp"],
    # perf: 16 sequences x 4096 tokens of a 4096-wide hidden state (Llama-7B class): 2.1 GB moved,
    # ~0.75 ms on an H100 (measured at 16384 tokens: 0.19 ms, under the window).
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 65536, "hidden": 4096},
    },
    "flops": "10 * tokens * hidden",
    "bytes": "2 * 4 * tokens * hidden",
    "source": "GPT-2 MLP activation",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float32)]


def get_init_inputs():
    return []
