"""3x3 stride-2 max pooling (padding 1) after the ResNet-50 stem convolution."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 1,
    "dtype": "float32",
    "tags": ["maxpool", "window", "cnn", "nchw"],
    # perf: ResNet-50 stem output (64 channels at 112x112 -> 56x56), inference batch 512.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 16, "width": 16},
        "perf": {"batch": 512, "channels": 64, "height": 112, "width": 112},
    },
    "flops": "9 * batch * channels * (height // 2) * (width // 2)",
    "bytes": "4 * batch * channels * (height * width + (height // 2) * (width // 2))",
    "source": "torchvision resnet50 maxpool",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs():
    return []
