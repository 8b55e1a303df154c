"""Linear layer with bias followed by tanh-GELU in bf16: the MLP fc_in of GPT-J."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "epilogue", "gelu", "mlp"],
    # perf: GPT-J-6B fc_in (4096 -> 16384, with bias, gelu_new) over 4 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 32, "d_in": 64, "d_out": 256},
        "perf": {"tokens": 8192, "d_in": 4096, "d_out": 16384},
    },
    "flops": "2 * tokens * d_in * d_out + 10 * tokens * d_out",
    "bytes": "2 * (tokens * d_in + d_in * d_out + d_out + tokens * d_out)",
    "source": "GPT-J-6B MLP fc_in + gelu_new",
}


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc_in = nn.Linear(d_in, d_out, bias=True, dtype=torch.bfloat16)
        nn.init.normal_(self.fc_in.weight, 0.0, d_in ** -0.5)  # unit-variance outputs
        nn.init.normal_(self.fc_in.bias, 0.0, 0.1)  # a trained, non-zero bias

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc_in(x), approximate="tanh")


def get_inputs(tokens, d_in):
    return [torch.randn(tokens, d_in, dtype=torch.bfloat16)]


def get_init_inputs(d_in, d_out):
    return [d_in, d_out]
