"""Per-token max and min of bf16 activations, the range of dynamic asymmetric 8-bit activation quantization."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["reduction", "rows", "quantization"],
    # perf: Llama-2-70B hidden size 8192, 16 sequences x 4096 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 65536, "hidden": 8192},
    },
    "flops": "2 * tokens * hidden",
    "bytes": "2 * (tokens * hidden + 2 * tokens)",
    "source": "Per-token dynamic int8 quantization (ZeroQuant-style)",
}


class Model(nn.Module):
    def forward(self, x):
        return x.amax(dim=-1), x.amin(dim=-1)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
