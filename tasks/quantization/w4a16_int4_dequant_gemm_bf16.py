"""W4A16 GEMM: unpack uint8-packed int4 weights, dequantize with group-128 scales, multiply bf16 inputs (AWQ/GPTQ)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "int4", "w4a16", "dequantize", "decode"],
    # perf: 16 decode tokens through a Llama-70B up_proj (8192 -> 28672): 117 MB of packed
    # weights; eagerly ~4 GB of unpacking temporaries are moved: ~2.3 ms.
    "shapes": {
        "small": {"tokens": 4, "d_in": 256, "d_out": 64},
        "perf": {"tokens": 16, "d_in": 8192, "d_out": 28672},
    },
    "flops": "2 * tokens * d_in * d_out + 2 * d_in * d_out",
    "bytes": "2 * tokens * d_in + d_out * d_in // 2 + 2 * d_out * d_in // 128 + 2 * tokens * d_out",
    # Numerics contract: byte j of a row holds weight 2j in its low nibble and 2j+1 in its
    # high nibble, unsigned with zero point 8; w = (nibble - 8) * scale[row, k // 128];
    # y = x @ w^T with fp32 accumulation, rounded to bf16. The reference rounds w to bf16
    # (as tensor-core kernels do); atol 5e-2 (outputs have std ~4) also admits exact fp32
    # dequantization, whose per-weight differences of <= 2**-9 add up to ~2e-2 over d_in.
    "tolerance": {"atol": 5e-2, "rtol": 1e-2},
    "source": "AWQ/GPTQ int4 weight-only quantized linear at decode",
}

GROUP = 128


class Model(nn.Module):
    def forward(self, x, w_packed, scales):
        d_out, half = w_packed.shape
        nibbles = torch.stack((w_packed & 0xF, w_packed >> 4), dim=-1).view(d_out, half * 2)
        w = (nibbles.to(torch.bfloat16) - 8).view(d_out, -1, GROUP) * scales.unsqueeze(-1)
        return x @ w.view(d_out, half * 2).t()


def get_inputs(tokens, d_in, d_out):
    x = torch.randn(tokens, d_in, dtype=torch.bfloat16)
    w_packed = torch.randint(0, 256, (d_out, d_in // 2), dtype=torch.uint8)
    scales = torch.rand(d_out, d_in // GROUP, dtype=torch.bfloat16) * 0.01 + 0.005
    return [x, w_packed, scales]


def get_init_inputs():
    return []
