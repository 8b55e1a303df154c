"""Square bf16 GEMM C = A @ B with fp32 accumulation, at the Llama-70B hidden size."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["gemm", "square"],
    # perf: 8192 x 8192 x 8192 (Llama-2/3-70B hidden size); 1.1 TFLOP, ~1.8 ms at ~600 TFLOP/s.
    "shapes": {
        "small": {"n": 64},
        "perf": {"n": 8192},
    },
    "flops": "2 * n * n * n",
    "bytes": "3 * 2 * n * n",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "bf16 GEMM at Llama-70B width",
}


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs(n):
    # B scaled by 1/sqrt(n) keeps C at O(1), where the bf16 tolerance is meaningful.
    return [torch.randn(n, n, dtype=torch.bfloat16), torch.randn(n, n, dtype=torch.bfloat16) / n**0.5]


def get_init_inputs():
    return []
