"""2x2 stride-2 average pooling on the downsampling shortcut of a ResNet-D (e.g. timm resnet50d) bottleneck."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 1,
    "dtype": "float32",
    "tags": ["avgpool", "window", "cnn", "nchw"],
    # perf: resnet50d layer2 entry (256 channels at 56x56 -> 28x28), inference batch 512.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 16, "width": 16},
        "perf": {"batch": 512, "channels": 256, "height": 56, "width": 56},
    },
    "flops": "4 * batch * channels * (height // 2) * (width // 2)",
    "bytes": "4 * batch * channels * (height * width + (height // 2) * (width // 2))",
    "source": "timm ResNet-D downsample_avg (Bag of Tricks, He et al. 2019)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(2, stride=2, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        return self.pool(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs():
    return []
