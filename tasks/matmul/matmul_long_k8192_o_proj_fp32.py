"""fp32 GEMM with a long K=8192 reduction, y = x @ W^T: the attention output projection of Llama-3-70B."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float32",
    "tags": ["gemm", "long-k", "llama"],
    # perf: a 2048-token prefill chunk through the Llama-3-70B o_proj (8192 -> 8192); 275 GFLOP,
    # ~5.5 ms at ~50 TFLOP/s fp32; 0.4 GB of inputs and output.
    "shapes": {
        "small": {"tokens": 32, "d_in": 1024, "d_out": 48},
        "perf": {"tokens": 2048, "d_in": 8192, "d_out": 8192},
    },
    "flops": "2 * tokens * d_in * d_out",
    "bytes": "4 * (tokens * d_in + d_in * d_out + tokens * d_out)",
    # The default nn.Linear init (|w| <= d_in**-0.5) keeps outputs O(1): fp32 reorderings of the
    # 8192-term sums stay near 1e-6, while TF32 inputs (~1e-3) and bf16 fail. True fp32 is the contract.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "Llama-3-70B attention o_proj in fp32",
}


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.o_proj = nn.Linear(d_in, d_out, bias=False, dtype=torch.float32)

    def forward(self, x):
        return self.o_proj(x)


def get_inputs(tokens, d_in):
    return [torch.randn(tokens, d_in, dtype=torch.float32)]


def get_init_inputs(d_in, d_out):
    return [d_in, d_out]
