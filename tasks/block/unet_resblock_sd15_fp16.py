"""A diffusion UNet ResBlock in fp16: GroupNorm(32), SiLU, conv3x3, add the projected timestep embedding, GroupNorm(32), SiLU, conv3x3, identity skip (SD 1.5 ResnetBlock2D)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "float16",
    "tags": ["unet", "resblock", "groupnorm", "silu", "conv2d", "diffusion", "nchw"],
    # perf: SD 1.5 UNet down block 0 resnet (320 channels on the 64x64 latent of a 512x512 image,
    # time embedding 1280), 8 images with classifier-free guidance (batch 16): 242 GFLOP of 3x3
    # convolutions (~0.6 ms) plus GroupNorm/SiLU/add passes over 42 MB maps (~0.5 GB moved):
    # ~0.9 ms on an H100, ~0.5 GB of memory.
    "shapes": {
        "small": {"batch": 2, "channels": 64, "height": 8, "width": 8, "temb_dim": 128},
        "perf": {"batch": 16, "channels": 320, "height": 64, "width": 64, "temb_dim": 1280},
    },
    "flops": "4 * 9 * batch * channels * channels * height * width + 2 * batch * temb_dim * channels",
    "bytes": "2 * (2 * batch * channels * height * width + batch * temb_dim + 18 * channels * channels + temb_dim * channels)",
    "source": "diffusers ResnetBlock2D (SD 1.5 UNet2DConditionModel, eps 1e-5, no dropout at inference)",
}


class Model(nn.Module):
    def __init__(self, channels, temb_dim, groups=32):
        super().__init__()

        def norm():
            layer = nn.GroupNorm(groups, channels, eps=1e-5, dtype=torch.float16)
            nn.init.normal_(layer.weight, 1.0, 0.1)
            nn.init.normal_(layer.bias, 0.0, 0.1)
            return layer

        def conv():
            layer = nn.Conv2d(channels, channels, 3, padding=1, dtype=torch.float16)
            nn.init.normal_(layer.weight, 0.0, (9 * channels) ** -0.5)  # unit-variance outputs
            nn.init.normal_(layer.bias, 0.0, 0.1)
            return layer

        self.norm1, self.conv1, self.norm2, self.conv2 = norm(), conv(), norm(), conv()
        self.time_emb_proj = nn.Linear(temb_dim, channels, dtype=torch.float16)
        nn.init.normal_(self.time_emb_proj.weight, 0.0, temb_dim ** -0.5)
        nn.init.normal_(self.time_emb_proj.bias, 0.0, 0.1)

    def forward(self, x, temb):
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = h + self.time_emb_proj(nn.functional.silu(temb))[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return x + h


def get_inputs(batch, channels, height, width, temb_dim):
    # Per-channel offsets and scales on the feature map, as in a trained UNet.
    offset = torch.randn(1, channels, 1, 1, dtype=torch.float32)
    scale = torch.rand(1, channels, 1, 1, dtype=torch.float32) * 2 + 0.5
    x = torch.randn(batch, channels, height, width, dtype=torch.float32) * scale + offset
    temb = torch.randn(batch, temb_dim, dtype=torch.float32) * 2  # sinusoidal embedding after the time MLP
    return [x.to(torch.float16), temb.to(torch.float16)]


def get_init_inputs(channels, temb_dim):
    return [channels, temb_dim]
