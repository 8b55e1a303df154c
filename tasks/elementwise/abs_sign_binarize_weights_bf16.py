"""Magnitude |W| and sign(W) of bf16 weights, the split of 1-bit weight binarization (BitNet, sign-magnitude quantizers)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "abs", "sign", "quantization", "binarization"],
    # perf: Llama-3-70B's fused gate_up_proj weight, [2 x 28672, 8192]. Eager: abs and sign
    # kernels, 4 x 940 MB moved -> ~1.25 ms on an H100; 2.8 GB of GPU memory.
    "shapes": {
        "small": {"rows": 128, "cols": 256},
        "perf": {"rows": 57344, "cols": 8192},
    },
    "flops": "2 * rows * cols",
    "bytes": "3 * 2 * rows * cols",
    # abs and sign are exact in bf16, and the weights are ~0.02, far below the default atol 1e-2.
    "tolerance": {"atol": 0.0, "rtol": 0.0},
    "source": "BitNet (Wang et al. 2023) BitLinear: sign(W) with the mean |W| scale",
}


class Model(nn.Module):
    def forward(self, weight):
        return weight.abs(), weight.sign()


def get_inputs(rows, cols):
    # Per-output-row scales around Llama's init std 0.02; exact zeros keep sign(0) = 0 exercised.
    scale = 0.01 + 0.03 * torch.rand(rows, 1, dtype=torch.bfloat16)
    w = torch.randn(rows, cols, dtype=torch.bfloat16) * scale
    return [w.masked_fill_(torch.rand(rows, cols) < 0.01, 0.0)]


def get_init_inputs():
    return []
