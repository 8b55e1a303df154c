"""Bias add + residual add (dropout off) + LayerNorm: Megatron's bias-dropout-add followed by the next LayerNorm."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "layernorm", "residual", "bias"],
    # perf: BLOOM-176B hidden 14336 (Megatron-DeepSpeed, skip_bias_add projections), 2 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 4096, "hidden": 14336},
    },
    "flops": "10 * tokens * hidden",
    "bytes": "4 * (3 * tokens * hidden + 3 * hidden)",
    "source": "Megatron-LM bias_dropout_add (inference, p=0) + LayerNorm, BLOOM-176B",
}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.norm.weight, 1.0, 0.1)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)

    def forward(self, x, bias, residual):
        # x is a projection's output whose bias was deferred (skip_bias_add) to this fusion.
        return self.norm(residual + (x + bias))


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.float32),
        torch.randn(hidden, dtype=torch.float32),
        torch.randn(tokens, hidden, dtype=torch.float32),
    ]


def get_init_inputs(hidden):
    return [hidden]
