"""fp16 matrix-vector product: the MLP down-projection of Llama-3.1-405B for one decode token."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float16",
    "tags": ["gemv", "decode", "memory-bound", "llama"],
    # perf: batch-1 decode through the Llama-3.1-405B down_proj (53248 -> 16384); reading
    # the 1.7 GB weight dominates: ~0.6 ms at ~3 TB/s.
    "shapes": {
        "small": {"batch": 1, "d_in": 256, "d_out": 128},
        "perf": {"batch": 1, "d_in": 53248, "d_out": 16384},
    },
    "flops": "2 * batch * d_in * d_out",
    "bytes": "2 * (batch * d_in + d_in * d_out + batch * d_out)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Llama-3.1-405B MLP down projection at batch-1 decode",
}


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.down_proj = nn.Linear(d_in, d_out, bias=False, dtype=torch.float16)

    def forward(self, x):
        return self.down_proj(x)


def get_inputs(batch, d_in):
    return [torch.randn(batch, d_in, dtype=torch.float16)]


def get_init_inputs(d_in, d_out):
    return [d_in, d_out]
