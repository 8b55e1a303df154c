"""GroupNorm with 32 groups and affine weight and bias in fp32, the first norm of each ResnetBlock2D in the SDXL UNet's 320-channel stage."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["groupnorm", "reduction", "diffusion", "unet", "cnn", "nchw"],
    # perf: SDXL UNet down block 0 (320 channels on the 128x128 latent of a 1024x1024 image),
    # 16 images with classifier-free guidance (batch 32): 671 MB in and out, ~2 GB moved eager:
    # ~0.7 ms on an H100, ~1.4 GB of memory.
    "shapes": {
        "small": {"batch": 2, "channels": 64, "height": 8, "width": 8},
        "perf": {"batch": 32, "channels": 320, "height": 128, "width": 128},
    },
    "flops": "8 * batch * channels * height * width",
    "bytes": "4 * (2 * batch * channels * height * width + 2 * channels)",
    "source": "diffusers ResnetBlock2D norm1 (GroupNorm(32, 320, eps=1e-5)), SDXL UNet2DConditionModel",
}


class Model(nn.Module):
    def __init__(self, channels, groups=32):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.norm.weight, 1.0, 0.5)
        nn.init.normal_(self.norm.bias, 0.0, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs(batch, channels, height, width):
    # Per-channel means and scales (as after a convolution), so groups see mixed statistics.
    offset = torch.randn(1, channels, 1, 1, dtype=torch.float32)
    scale = torch.rand(1, channels, 1, 1, dtype=torch.float32) * 2 + 0.25
    return [torch.randn(batch, channels, height, width, dtype=torch.float32) * scale + offset]


def get_init_inputs(channels):
    return [channels]
