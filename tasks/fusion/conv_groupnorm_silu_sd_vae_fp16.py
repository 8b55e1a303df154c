"""3x3 conv + GroupNorm(32) + SiLU in fp16: conv1 -> norm2 -> nonlinearity of a Stable Diffusion VAE decoder ResnetBlock2D (no time embedding)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv", "groupnorm", "silu", "diffusion", "vae", "cnn"],
    # perf: SD-1.5 VAE decoder up_blocks[2] (256 channels at 256x256 for a 512x512 image), batch 8.
    # Eager: 619 GFLOP conv (~1.2 ms) + ~1.6 GB moved by GroupNorm and SiLU (~0.5 ms); peak ~1.1 GB.
    "shapes": {
        "small": {"batch": 2, "in_ch": 64, "out_ch": 64, "size": 8},
        "perf": {"batch": 8, "in_ch": 256, "out_ch": 256, "size": 256},
    },
    "flops": "2 * batch * out_ch * in_ch * 9 * size ** 2 + 15 * batch * out_ch * size ** 2",
    "bytes": "2 * (batch * (in_ch + out_ch) * size ** 2 + 9 * in_ch * out_ch + 3 * out_ch)",
    "source": "diffusers ResnetBlock2D (temb_channels=None) in AutoencoderKL decoder: silu(norm2(conv1(h)))",
}


class Model(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1, dtype=torch.float16)
        self.norm2 = nn.GroupNorm(32, out_ch, eps=1e-6, dtype=torch.float16)
        nn.init.normal_(self.conv1.weight, 0.0, (in_ch * 9) ** -0.5)
        nn.init.normal_(self.conv1.bias, 0.0, 0.5)
        nn.init.normal_(self.norm2.weight, 1.0, 0.3)
        nn.init.normal_(self.norm2.bias, 0.0, 0.3)

    def forward(self, h):
        return nn.functional.silu(self.norm2(self.conv1(h)))


def get_inputs(batch, in_ch, size):
    return [torch.randn(batch, in_ch, size, size, dtype=torch.float16)]


def get_init_inputs(in_ch, out_ch):
    return [in_ch, out_ch]
