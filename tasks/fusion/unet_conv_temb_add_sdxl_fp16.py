"""UNet ResnetBlock2D middle in fp16: conv1 (3x3 + bias) plus the time-embedding projection Linear(SiLU(temb)) broadcast over the feature map (SD/SDXL)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv", "silu", "gemm", "broadcast", "diffusion", "unet"],
    # perf: SDXL UNet down_blocks[0] ResnetBlock2D (320 channels at the 128x128 latent of a
    # 1024x1024 image, temb 1280), 8 images with classifier-free guidance = batch 16.
    # Eager: 483 GFLOP conv (~1 ms) + ~0.7 GB moved; peak ~0.6 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "size": 8, "temb_dim": 32},
        "perf": {"batch": 16, "channels": 320, "size": 128, "temb_dim": 1280},
    },
    "flops": "2 * batch * channels ** 2 * 9 * size ** 2 + 2 * batch * temb_dim * channels + batch * channels * size ** 2",
    "bytes": "2 * (2 * batch * channels * size ** 2 + 9 * channels ** 2 + batch * temb_dim + temb_dim * channels)",
    "source": "diffusers ResnetBlock2D.forward: conv1(h) + time_emb_proj(nonlinearity(temb))[:, :, None, None]",
}


class Model(nn.Module):
    def __init__(self, channels, temb_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, dtype=torch.float16)
        self.time_emb_proj = nn.Linear(temb_dim, channels, dtype=torch.float16)
        nn.init.normal_(self.conv1.weight, 0.0, (channels * 9) ** -0.5)
        nn.init.normal_(self.time_emb_proj.weight, 0.0, temb_dim ** -0.5)
        nn.init.normal_(self.conv1.bias, 0.0, 0.2)
        nn.init.normal_(self.time_emb_proj.bias, 0.0, 0.2)

    def forward(self, h, temb):
        # h: normalized, activated features (batch, channels, size, size); temb: (batch, temb_dim)
        t = self.time_emb_proj(nn.functional.silu(temb))
        return self.conv1(h) + t[:, :, None, None]


def get_inputs(batch, channels, size, temb_dim):
    return [
        torch.randn(batch, channels, size, size, dtype=torch.float16),
        torch.randn(batch, temb_dim, dtype=torch.float16) * 2,
    ]


def get_init_inputs(channels, temb_dim):
    return [channels, temb_dim]
