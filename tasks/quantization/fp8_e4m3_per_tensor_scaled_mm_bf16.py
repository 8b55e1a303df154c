"""FP8 e4m3 GEMM with per-tensor scales to bf16 (torch._scaled_mm semantics), emulated by upcasting to fp32: an FP8 linear layer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "float8_e4m3fn",
    "tags": ["gemm", "fp8", "per-tensor", "scaled-mm"],
    # perf: a 4096-token prefill chunk through a Llama-3-8B up_proj (4096 -> 14336) with FP8
    # weights and activations; the fp32 emulation is a 481 GFLOP fp32 GEMM, ~10 ms eagerly
    # (~1 ms on FP8 tensor cores); ~1 GB of memory.
    "shapes": {
        "small": {"tokens": 32, "d_in": 256, "d_out": 64},
        "perf": {"tokens": 4096, "d_in": 4096, "d_out": 14336},
    },
    "flops": "2 * tokens * d_in * d_out",
    "bytes": "tokens * d_in + d_out * d_in + 8 + 2 * tokens * d_out",
    # Numerics contract: a_bits / w_bits hold float8_e4m3fn bit patterns (no NaNs); products of
    # e4m3 values are exact in fp32, sums are accumulated in fp32 (any order), then
    # out = bf16(acc * scale_a * scale_b). Outputs are < ~4, so bf16 rounding (rtol 1e-2)
    # dominates; Hopper FP8 tensor-core accumulation (~2**-14 per add) stays well inside it.
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "FP8 per-tensor scaled linear (Transformer Engine, vLLM fp8 checkpoints, torch._scaled_mm)",
}


class Model(nn.Module):
    def forward(self, a_bits, w_bits, scale_a, scale_b):
        a = a_bits.view(torch.float8_e4m3fn).to(torch.float32)
        w = w_bits.view(torch.float8_e4m3fn).to(torch.float32)
        return ((a @ w.t()) * scale_a * scale_b).to(torch.bfloat16)


def _e4m3_bits(*shape):
    values = (torch.randn(*shape, dtype=torch.float32) * 32).clamp(-448, 448)
    return values.to(torch.float8_e4m3fn).view(torch.uint8)


def get_inputs(tokens, d_in, d_out):
    # Entries ~32 (std) use the e4m3 range; the scales bring outputs to std 0.25-0.8 (mostly
    # below 2, where one bf16 ulp is well inside rtol 1e-2).
    scale_a = (torch.rand(1, dtype=torch.float32) * 0.4 + 0.5) / (32 * d_in**0.25)
    scale_b = (torch.rand(1, dtype=torch.float32) * 0.4 + 0.5) / (32 * d_in**0.25)
    return [_e4m3_bits(tokens, d_in), _e4m3_bits(d_out, d_in), scale_a, scale_b]


def get_init_inputs():
    return []
