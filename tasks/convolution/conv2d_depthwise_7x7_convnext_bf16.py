"""7x7 depthwise convolution with bias (groups = channels), the spatial mixing step of a ConvNeXt block."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["conv2d", "depthwise", "cnn", "nchw"],
    # perf: ConvNeXt-B stage 1 (128 channels at 56x56), batch 256.
    "shapes": {
        "small": {"batch": 2, "channels": 16, "height": 12, "width": 12},
        "perf": {"batch": 256, "channels": 128, "height": 56, "width": 56},
    },
    "flops": "2 * 49 * batch * channels * height * width",
    "bytes": "2 * (2 * batch * channels * height * width + 50 * channels)",
    "source": "ConvNeXt (Liu et al. 2022) Block.dwconv",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels, dtype=torch.bfloat16)
        nn.init.normal_(self.conv.bias, 0.0, 0.5)  # the default init is too small to matter at bf16 tolerance

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs(channels):
    return [channels]
