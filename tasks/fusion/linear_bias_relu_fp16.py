"""Linear layer with bias followed by ReLU in fp16: the MLP fc1 of OPT models."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["gemm", "epilogue", "relu", "mlp"],
    # perf: OPT-6.7B fc1 (4096 -> 16384, with bias, ReLU) over 4 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 32, "d_in": 64, "d_out": 256},
        "perf": {"tokens": 8192, "d_in": 4096, "d_out": 16384},
    },
    "flops": "2 * tokens * d_in * d_out + tokens * d_out",
    "bytes": "2 * (tokens * d_in + d_in * d_out + d_out + tokens * d_out)",
    "source": "OPT-6.7B decoder MLP fc1 + ReLU",
}


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_out, bias=True, dtype=torch.float16)
        nn.init.normal_(self.fc1.weight, 0.0, d_in ** -0.5)  # unit-variance outputs
        nn.init.normal_(self.fc1.bias, 0.0, 0.1)  # a trained, non-zero bias

    def forward(self, x):
        return torch.relu(self.fc1(x))


def get_inputs(tokens, d_in):
    return [torch.randn(tokens, d_in, dtype=torch.float16)]


def get_init_inputs(d_in, d_out):
    return [d_in, d_out]
