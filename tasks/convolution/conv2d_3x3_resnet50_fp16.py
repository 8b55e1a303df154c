"""3x3 stride-1 convolution (64 -> 64 channels, no bias) inside a ResNet-50 layer1 bottleneck."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "float16",
    "tags": ["conv2d", "implicit_gemm", "cnn", "nchw"],
    # perf: ResNet-50 layer1 conv2 (64 channels at 56x56), inference batch 512.
    "shapes": {
        "small": {"batch": 2, "channels": 16, "height": 8, "width": 8},
        "perf": {"batch": 512, "channels": 64, "height": 56, "width": 56},
    },
    "flops": "2 * batch * channels * channels * 9 * height * width",
    "bytes": "2 * (2 * batch * channels * height * width + 9 * channels * channels)",
    "source": "torchvision resnet50 layer1.*.conv2",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False, dtype=torch.float16)

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float16)]


def get_init_inputs(channels):
    return [channels]
