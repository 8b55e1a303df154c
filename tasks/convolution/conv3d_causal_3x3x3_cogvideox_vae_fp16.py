"""Causal 3x3x3 video convolution (first frame repeated twice in front, spatial zero padding) with bias: CogVideoX VAE CausalConv3d."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv3d", "video", "causal", "vae", "ncdhw"],
    # perf: CogVideoX VAE decoder at 256 channels and 120x180 (a 720x480 video at 1/4 scale), an
    # 8-frame chunk; 611 GFLOP, ~1-2 ms (3D implicit GEMM) plus a 110 MB concat copy; ~0.3 GB.
    "shapes": {
        "small": {"batch": 1, "channels": 16, "frames": 4, "height": 8, "width": 8},
        "perf": {"batch": 1, "channels": 256, "frames": 8, "height": 120, "width": 180},
    },
    "flops": "2 * batch * channels * channels * 27 * frames * height * width",
    "bytes": "2 * (2 * batch * channels * frames * height * width + 27 * channels * channels + channels)",
    "source": "diffusers CogVideoXCausalConv3d (pad_mode constant, first call without conv_cache)",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv3d(channels, channels, 3, padding=(0, 1, 1), dtype=torch.float16)
        nn.init.normal_(self.conv.bias, 0.0, 0.5)  # the default init is too small to matter at fp16 tolerance

    def forward(self, x):
        first = x[:, :, :1]
        return self.conv(torch.cat([first, first, x], dim=2))


def get_inputs(batch, channels, frames, height, width):
    return [torch.randn(batch, channels, frames, height, width, dtype=torch.float16)]


def get_init_inputs(channels):
    return [channels]
