"""NF4 lookup-table dequantization with blockwise (64) absmax scales to bf16, as QLoRA does before every matmul."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["dequantize", "nf4", "lookup-table", "qlora", "unpack"],
    # perf: a Llama-3-8B up_proj (14336 x 4096): 29 MB packed -> 117 MB bf16; eagerly ~2.3 GB
    # moved through int64 indices and fp32 temporaries: ~0.8 ms, ~1.2 GB peak.
    "shapes": {
        "small": {"d_out": 64, "d_in": 256},
        "perf": {"d_out": 14336, "d_in": 4096},
    },
    "flops": "2 * d_out * d_in",
    "bytes": "d_out * d_in // 2 + 4 * d_out * d_in // 64 + 2 * d_out * d_in",
    # Numerics contract (bitsandbytes kDequantizeBlockwise): byte j of a row holds weight 2j in
    # its HIGH nibble and 2j+1 in its low nibble; w = bf16(code[nibble] * absmax[row, k // 64])
    # with the product in fp32. Weights are ~1e-2, so atol is 1e-6; rtol 1e-2 admits one ulp.
    "tolerance": {"atol": 1e-6, "rtol": 1e-2},
    "source": "QLoRA NF4 (Dettmers et al. 2023), bitsandbytes dequantize_4bit",
}

BLOCK = 64
NF4_CODE = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("code", torch.tensor(NF4_CODE, dtype=torch.float32))

    def forward(self, w_packed, absmax):
        d_out, half = w_packed.shape
        nibbles = torch.stack((w_packed >> 4, w_packed & 0xF), dim=-1).view(d_out, -1, BLOCK)
        w = self.code[nibbles.long()] * absmax.unsqueeze(-1)
        return w.view(d_out, half * 2).to(torch.bfloat16)


def get_inputs(d_out, d_in):
    w_packed = torch.randint(0, 256, (d_out, d_in // 2), dtype=torch.uint8)
    absmax = torch.rand(d_out, d_in // BLOCK, dtype=torch.float32) * 0.04 + 0.02
    return [w_packed, absmax]


def get_init_inputs():
    return []
