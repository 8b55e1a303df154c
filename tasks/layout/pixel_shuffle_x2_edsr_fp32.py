"""F.pixel_shuffle with upscale 2 in the sub-pixel upsampler of a super-resolution network (EDSR/SwinIR x4 tail)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float32",
    "tags": ["pixel_shuffle", "upsample", "super-resolution", "memory-bound"],
    # perf: second x2 stage of a x4 upsampler (64 features, conv to 256) taking a 960x540
    # frame to 4K: 2.1 GB read and written, ~1.4 ms; 4.2 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 4, "height": 6, "width": 8},
        "perf": {"batch": 1, "channels": 64, "height": 1080, "width": 1920},
    },
    "flops": "0",
    "bytes": "2 * 4 * batch * 4 * channels * height * width",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "EDSR / SwinIR Upsample: conv(64 -> 256) + PixelShuffle(2), twice for x4",
}


class Model(nn.Module):
    def forward(self, x):
        return F.pixel_shuffle(x, 2)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, 4 * channels, height, width, dtype=torch.float32)]


def get_init_inputs():
    return []
