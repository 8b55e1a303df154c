"""GroupNorm (32 groups) followed by SiLU, the pre-convolution step of every ResnetBlock2D in the SDXL VAE decoder."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["groupnorm", "silu", "diffusion", "cnn", "nchw"],
    # perf: SDXL VAE decoder last up block (128 channels at full 1024x1024 resolution), 4 images.
    "shapes": {
        "small": {"batch": 2, "channels": 64, "height": 8, "width": 8},
        "perf": {"batch": 4, "channels": 128, "height": 1024, "width": 1024},
    },
    "flops": "12 * batch * channels * height * width",
    "bytes": "2 * (2 * batch * channels * height * width + 2 * channels)",
    "source": "diffusers ResnetBlock2D (norm1 + nonlinearity), SDXL AutoencoderKL decoder",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.GroupNorm(32, channels, eps=1e-6, dtype=torch.bfloat16)
        nn.init.normal_(self.norm.weight, 1.0, 0.5)
        nn.init.normal_(self.norm.bias, 0.0, 0.5)

    def forward(self, x):
        return nn.functional.silu(self.norm(x))


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs(channels):
    return [channels]
