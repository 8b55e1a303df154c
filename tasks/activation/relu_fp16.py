"""ReLU over the fp16 FFN intermediate activation of an OPT model."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "mlp"],
    # perf: OPT-30B FFN intermediate (7168 -> 28672), 8 sequences x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "ffn": 256},
        "perf": {"tokens": 16384, "ffn": 28672},
    },
    "flops": "tokens * ffn",
    "bytes": "2 * 2 * tokens * ffn",
    "source": "OPT-30B MLP activation",
}


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs(tokens, ffn):
    return [torch.randn(tokens, ffn, dtype=torch.float16)]


def get_init_inputs():
    return []
