"""PSPNet pyramid pooling: adaptive average pooling of one feature map to 1x1, 2x2, 3x3 and 6x6 bins."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 2,
    "dtype": "float32",
    "tags": ["adaptive_avgpool", "reduction", "segmentation", "cnn", "nchw"],
    # perf: dilated ResNet-101 output (2048 channels, stride 8) for 16 crops of 512x512.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 12, "width": 12},
        "perf": {"batch": 16, "channels": 2048, "height": 64, "width": 64},
    },
    "flops": "4 * batch * channels * height * width",
    "bytes": "4 * batch * channels * (height * width + 1 + 4 + 9 + 36)",
    "source": "PSPNet Pyramid Pooling Module (Zhao et al. 2017), bins (1, 2, 3, 6)",
}


class Model(nn.Module):
    def __init__(self, bins=(1, 2, 3, 6)):
        super().__init__()
        self.bins = bins

    def forward(self, x):
        # Bins that do not divide the map (64 -> 3, 6) overlap, as adaptive pooling defines them.
        return tuple(nn.functional.adaptive_avg_pool2d(x, b) for b in self.bins)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs():
    return []
