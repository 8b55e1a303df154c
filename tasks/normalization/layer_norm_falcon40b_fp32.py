"""LayerNorm with affine weight and bias over the hidden state, as before each Falcon-40B decoder block."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["layernorm", "reduction", "transformer"],
    # perf: 16 sequences x 2048 tokens of Falcon-40B's 8192-wide hidden state.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 32768, "hidden": 8192},
    },
    "flops": "8 * tokens * hidden",
    "bytes": "4 * (2 * tokens * hidden + 2 * hidden)",
    "source": "Falcon-40B ln_attn / ln_mlp",
}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.norm.weight, 1.0, 0.5)
        nn.init.normal_(self.norm.bias, 0.0, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float32)]


def get_init_inputs(hidden):
    return [hidden]
