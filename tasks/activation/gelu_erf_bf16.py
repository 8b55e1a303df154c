"""Exact (erf) GELU over the bf16 MLP intermediate activation of Falcon-7B."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "mlp"],
    # perf: Falcon-7B MLP intermediate (4544 -> 18176), 16 sequences x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "ffn": 256},
        "perf": {"tokens": 32768, "ffn": 18176},
    },
    "flops": "8 * tokens * ffn",
    "bytes": "2 * 2 * tokens * ffn",
    "source": "Falcon-7B MLP activation",
}


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x, approximate="none")


def get_inputs(tokens, ffn):
    return [torch.randn(tokens, ffn, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
