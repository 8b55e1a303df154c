"""Weight-only int8 linear (W8A16): dequantize int8 weights with per-output-channel bf16 scales, then a bf16 GEMM with the activations."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "int8", "w8a16", "dequantize", "weight-only"],
    # perf: Llama-3-8B down_proj (14336 -> 4096) with int8 weights, a 4096-token prefill chunk.
    # Eager: 481 GFLOP bf16 GEMM (~0.8 ms) + ~0.5 GB moved by the dequantization; peak ~0.6 GB.
    "shapes": {
        "small": {"tokens": 8, "d_in": 256, "d_out": 64},
        "perf": {"tokens": 4096, "d_in": 14336, "d_out": 4096},
    },
    "flops": "2 * tokens * d_in * d_out + d_in * d_out",
    "bytes": "2 * tokens * d_in + d_out * d_in + 2 * d_out + 2 * tokens * d_out",
    # Numerics contract: w = int8 * scale[row] rounded to bf16 (exact for a kernel that scales the
    # fp32 accumulator instead, up to ~5e-3 on outputs of std ~0.5), fp32 accumulation, bf16 output.
    # rtol 2e-2: that difference flips the final bf16 rounding by one ulp (0.8% relative),
    # which exceeds half the default bound for outputs above 2.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "TensorRT-LLM / vLLM weight-only int8 (per-channel) quantized linear; bitsandbytes-style W8A16",
}


class Model(nn.Module):
    def forward(self, x, w_int8, scales):
        w = w_int8.to(x.dtype) * scales[:, None]
        return x @ w.t()


def get_inputs(tokens, d_in, d_out):
    # int8 codes uniform in [-127, 127] (std ~73); per-channel scales give outputs of std ~0.4-0.6
    # (the size of a residual-stream update).
    scales = (torch.rand(d_out, dtype=torch.float32) * 0.5 + 0.75) / (146 * d_in ** 0.5)
    return [
        torch.randn(tokens, d_in, dtype=torch.bfloat16),
        torch.randint(-127, 128, (d_out, d_in), dtype=torch.int8),
        scales.to(torch.bfloat16),
    ]


def get_init_inputs():
    return []
