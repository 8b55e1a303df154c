"""Row-wise absmax int8 weight dequantization fused with a bf16 GEMM, y = x @ (W_q * absmax / 127)^T (LLM.int8 / bitsandbytes int8 weights)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["dequantize", "int8", "row-wise", "gemm", "weight-only"],
    # perf: a 2048-token prefill chunk through a Llama-3-8B down_proj (14336 -> 4096) with int8
    # weights; 240 GFLOP (~0.4 ms) plus ~1.1 GB of eager dequantization traffic (~0.4 ms):
    # ~0.8 ms, ~0.6 GB of memory.
    "shapes": {
        "small": {"tokens": 32, "d_in": 256, "d_out": 64},
        "perf": {"tokens": 2048, "d_in": 14336, "d_out": 4096},
    },
    "flops": "2 * tokens * d_in * d_out + 2 * d_in * d_out",
    "bytes": "2 * tokens * d_in + d_out * d_in + 4 * d_out + 2 * tokens * d_out",
    # Numerics contract: w = bf16(fp32(w_q) * (absmax[row] / 127.0)); y = x @ w^T with fp32
    # accumulation, rounded to bf16. Outputs have std ~0.5. atol is 2e-2, not 1e-2, so that a
    # kernel keeping w in fp32 (or scaling x @ w_q^T after the GEMM) passes with margin: it
    # skips the 2**-9 rounding of each weight, which moves outputs by up to ~5e-3.
    "tolerance": {"atol": 2e-2, "rtol": 1e-2},
    "source": "bitsandbytes LLM.int8 weight storage (int8 CB + row-wise absmax SCB), dequantized for a bf16 GEMM",
}


class Model(nn.Module):
    def forward(self, x, w_q, absmax):
        w = (w_q.to(torch.float32) * (absmax / 127.0)).to(torch.bfloat16)
        return x @ w.t()


def get_inputs(tokens, d_in, d_out):
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16)
    w_q = torch.randint(-127, 128, (d_out, d_in), dtype=torch.int8)
    # Uniform int8 codes have std ~73, so absmax ~0.85 / sqrt(d_in) gives outputs of std ~0.5
    # (mostly below 2, where one bf16 ulp is well inside rtol 1e-2); it differs per row, as
    # real per-row absmax values do.
    absmax = (torch.rand(d_out, 1, dtype=torch.float32) + 0.5) * (0.85 / d_in**0.5)
    return [x, w_q, absmax]


def get_init_inputs():
    return []
