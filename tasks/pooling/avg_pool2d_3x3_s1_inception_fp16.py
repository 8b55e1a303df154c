"""3x3 stride-1 average pooling with padding 1 (zero padding counted), the pool branch of every Inception-v3 InceptionA block."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 1,
    "dtype": "float16",
    "tags": ["avgpool", "window", "cnn", "nchw", "inception"],
    # perf: Inception-v3 Mixed_5d input (288 channels at 35x35), inference batch 1024: 722 MB in
    # and out: ~0.5 ms on an H100, ~1.5 GB of memory.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 35, "width": 35},
        "perf": {"batch": 1024, "channels": 288, "height": 35, "width": 35},
    },
    "flops": "9 * batch * channels * height * width",
    "bytes": "2 * 2 * batch * channels * height * width",
    "source": "torchvision Inception3 InceptionA: F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)",
}


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


def get_inputs(batch, channels, height, width):
    # Post-ReLU-like features with per-channel scales.
    scale = torch.rand(1, channels, 1, 1, dtype=torch.float32) * 2 + 0.5
    return [(torch.randn(batch, channels, height, width, dtype=torch.float32).relu() * scale).to(torch.float16)]


def get_init_inputs():
    return []
