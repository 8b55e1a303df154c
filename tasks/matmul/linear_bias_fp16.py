"""A linear layer with bias in fp16: the q/k/v projection of a Llama-7B attention block."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float16",
    "tags": ["gemm", "llama"],
    # perf: a 4 x 4096-token prefill through a 4096 -> 4096 projection (Llama-7B hidden size):
    # 550 GFLOP, ~0.8 ms on an H100 (measured at 4096 tokens: 0.21 ms, under the window).
    "shapes": {
        "small": {"tokens": 32, "d_in": 64, "d_out": 48},
        "perf": {"tokens": 16384, "d_in": 4096, "d_out": 4096},
    },
    "flops": "2 * tokens * d_in * d_out",
    "bytes": "2 * (tokens * d_in + d_in * d_out + d_out + tokens * d_out)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Llama-7B attention projection",
}


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out, bias=True, dtype=torch.float16)

    def forward(self, x):
        return self.proj(x)


def get_inputs(tokens, d_in):
    return [torch.randn(tokens, d_in, dtype=torch.float16)]


def get_init_inputs(d_in, d_out):
    return [d_in, d_out]
