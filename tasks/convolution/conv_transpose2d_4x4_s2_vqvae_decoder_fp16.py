"""4x4 stride-2 transposed convolution with bias (2x upsampling, 256 -> 128 channels), as in the VQ-VAE / VQ-VAE-2 decoder."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "float16",
    "tags": ["conv_transpose2d", "upsample", "vae", "nchw"],
    # perf: a VQ-VAE-2-style decoder upsampling 256 channels at 64x64 to 128 channels at 128x128,
    # batch 64; 275 GFLOP (~0.5 ms) and 0.4 GB moved: ~0.6-1 ms, ~0.4 GB.
    "shapes": {
        "small": {"batch": 2, "in_channels": 16, "out_channels": 8, "height": 8, "width": 8},
        "perf": {"batch": 64, "in_channels": 256, "out_channels": 128, "height": 64, "width": 64},
    },
    "flops": "2 * batch * in_channels * out_channels * 16 * height * width",
    "bytes": "2 * (batch * in_channels * height * width + 4 * batch * out_channels * height * width + 16 * in_channels * out_channels + out_channels)",
    "source": "VQ-VAE / VQ-VAE-2 decoder (van den Oord et al. 2017; Razavi et al. 2019): ConvTranspose2d(k=4, s=2, p=1)",
}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1, dtype=torch.float16)
        nn.init.normal_(self.up.bias, 0.0, 0.5)  # the default init is too small to matter at fp16 tolerance

    def forward(self, x):
        return self.up(x)


def get_inputs(batch, in_channels, height, width):
    return [torch.randn(batch, in_channels, height, width, dtype=torch.float16)]


def get_init_inputs(in_channels, out_channels):
    return [in_channels, out_channels]
