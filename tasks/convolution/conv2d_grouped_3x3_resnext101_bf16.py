"""Grouped 3x3 convolution (groups=32, 8 channels per group, no bias), the middle conv of a ResNeXt-101 32x8d bottleneck."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["conv2d", "grouped", "cnn", "nchw"],
    # perf: ResNeXt-101 32x8d layer1 conv2 (256 channels in 32 groups at 56x56), batch 256;
    # 30 GFLOP and 0.8 GB moved: ~0.5-1 ms (grouped kernels fall short of bandwidth), 0.8 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 64, "height": 8, "width": 8},
        "perf": {"batch": 256, "channels": 256, "height": 56, "width": 56},
    },
    "flops": "2 * batch * channels * (channels // 32) * 9 * height * width",
    "bytes": "2 * (2 * batch * channels * height * width + 9 * channels * (channels // 32))",
    "source": "torchvision resnext101_32x8d layer1.*.conv2 (Xie et al. 2017)",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=32, bias=False, dtype=torch.bfloat16)

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs(channels):
    return [channels]
