"""Square fp32 GEMM C = A @ B, the product behind fp32 linear layers at Llama-7B width."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float32",
    "tags": ["gemm", "square"],
    # perf: 4096 x 4096 x 4096 (Llama-7B / Mistral-7B hidden size); 137 GFLOP, ~3 ms at ~50 TFLOP/s fp32.
    "shapes": {
        "small": {"n": 64},
        "perf": {"n": 4096},
    },
    "flops": "2 * n * n * n",
    "bytes": "3 * 4 * n * n",
    # B is scaled by 1/sqrt(n) so entries of C are O(1): fp32 reorderings of the K=4096 sum
    # stay near 1e-5, while TF32 inputs (~1e-3) and bf16 fail. True fp32 is the contract.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "fp32 GEMM at Llama-7B width",
}


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs(n):
    return [torch.randn(n, n, dtype=torch.float32), torch.randn(n, n, dtype=torch.float32) / n**0.5]


def get_init_inputs():
    return []
