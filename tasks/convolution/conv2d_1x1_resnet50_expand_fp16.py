"""1x1 convolution expanding 64 -> 256 channels (no bias), the last projection of a ResNet-50 layer1 bottleneck."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "float16",
    "tags": ["conv2d", "pointwise_conv", "gemm", "cnn", "nchw"],
    # perf: ResNet-50 layer1 conv3 (64 -> 256 channels at 56x56), throughput inference batch 1024.
    "shapes": {
        "small": {"batch": 2, "in_channels": 16, "out_channels": 32, "height": 8, "width": 8},
        "perf": {"batch": 1024, "in_channels": 64, "out_channels": 256, "height": 56, "width": 56},
    },
    "flops": "2 * batch * in_channels * out_channels * height * width",
    "bytes": "2 * (batch * (in_channels + out_channels) * height * width + in_channels * out_channels)",
    "source": "torchvision resnet50 layer1.*.conv3",
}


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False, dtype=torch.float16)

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, in_channels, height, width):
    return [torch.randn(batch, in_channels, height, width, dtype=torch.float16)]


def get_init_inputs(in_channels, out_channels):
    return [in_channels, out_channels]
