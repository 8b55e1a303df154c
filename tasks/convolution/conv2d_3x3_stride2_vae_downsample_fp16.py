"""Asymmetric (0,1,0,1) zero pad + 3x3 stride-2 convolution with bias: the Downsample2D of the Stable Diffusion VAE encoder."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "convolution",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv2d", "strided", "downsample", "implicit_gemm", "vae", "nchw"],
    # perf: SD VAE encoder first downsample (128 channels, 512x512 -> 256x256), batch 8; 155 GFLOP
    # (~0.3 ms) plus ~1.7 GB moved eagerly by the pad copy and the conv (~0.6 ms): ~0.9 ms, ~1.3 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 16, "height": 16, "width": 16},
        "perf": {"batch": 8, "channels": 128, "height": 512, "width": 512},
    },
    "flops": "2 * batch * channels * channels * 9 * (height // 2) * (width // 2)",
    "bytes": "2 * (batch * channels * height * width + batch * channels * (height // 2) * (width // 2) + 9 * channels * channels + channels)",
    "source": "diffusers Downsample2D(padding=0) in the SD / SDXL AutoencoderKL encoder",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=0, dtype=torch.float16)
        nn.init.normal_(self.conv.bias, 0.0, 0.5)  # the default init is too small to matter at fp16 tolerance

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float16)]


def get_init_inputs(channels):
    return [channels]
