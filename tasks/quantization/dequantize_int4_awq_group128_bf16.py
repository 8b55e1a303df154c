"""Dequantize uint8-packed int4 weights with per-group (128) scales and zero points to bf16 (AWQ/GPTQ weight unpacking)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["dequantize", "int4", "group-quant", "unpack"],
    # perf: a Llama-3-70B up_proj (28672 x 8192): 117 MB packed -> 470 MB bf16; eagerly ~7 GB
    # moved through uint8/fp32 temporaries: ~2.4 ms, ~2.5 GB peak.
    "shapes": {
        "small": {"d_out": 64, "d_in": 512},
        "perf": {"d_out": 28672, "d_in": 8192},
    },
    "flops": "2 * d_out * d_in",
    "bytes": "d_out * d_in // 2 + 3 * d_out * d_in // 128 + 2 * d_out * d_in",
    # Numerics contract: byte j of a row holds weight 2j in its low nibble and 2j+1 in its high
    # nibble (unsigned 0..15); w = bf16((nibble - zero[row, k // 128]) * scale[row, k // 128]).
    # (nibble - zero) is a small integer, so the product is exact in fp32 and any correct kernel
    # (fp32 or bf16 arithmetic) rounds it to the same bf16 value. Weights are ~1e-2, so atol
    # is 1e-6; rtol 1e-2 only admits a one-ulp difference.
    "tolerance": {"atol": 1e-6, "rtol": 1e-2},
    "source": "AWQ / GPTQ int4 group-128 asymmetric weight dequantization",
}

GROUP = 128


class Model(nn.Module):
    def forward(self, w_packed, scales, zeros):
        d_out, half = w_packed.shape
        nibbles = torch.stack((w_packed & 0xF, w_packed >> 4), dim=-1).view(d_out, -1, GROUP)
        w = (nibbles.float() - zeros.unsqueeze(-1).float()) * scales.unsqueeze(-1).float()
        return w.view(d_out, half * 2).to(torch.bfloat16)


def get_inputs(d_out, d_in):
    w_packed = torch.randint(0, 256, (d_out, d_in // 2), dtype=torch.uint8)
    scales = torch.rand(d_out, d_in // GROUP, dtype=torch.bfloat16) * 0.01 + 0.002
    zeros = torch.randint(0, 16, (d_out, d_in // GROUP), dtype=torch.uint8)
    return [w_packed, scales, zeros]


def get_init_inputs():
    return []
