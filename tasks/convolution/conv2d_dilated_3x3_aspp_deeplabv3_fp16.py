"""Atrous (dilation 12) 3x3 convolution 2048 -> 256 channels, no bias: a branch of the DeepLabV3 ASPP head."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "float16",
    "tags": ["conv2d", "dilated", "atrous", "segmentation", "nchw"],
    # perf: torchvision deeplabv3_resnet50 ASPP rate-12 branch on 520x520 crops (output stride 8,
    # 65x65 features), batch 16; 640 GFLOP, ~1-2 ms; 0.3 GB.
    "shapes": {
        "small": {"batch": 2, "in_channels": 32, "out_channels": 16, "height": 24, "width": 24},
        "perf": {"batch": 16, "in_channels": 2048, "out_channels": 256, "height": 65, "width": 65},
    },
    "flops": "2 * batch * in_channels * out_channels * 9 * height * width",
    "bytes": "2 * (batch * (in_channels + out_channels) * height * width + 9 * in_channels * out_channels)",
    "source": "torchvision DeepLabV3 ASPPConv (atrous rates 12/24/36; Chen et al. 2017)",
}

DILATION = 12


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, 3, padding=DILATION, dilation=DILATION, bias=False, dtype=torch.float16
        )

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, in_channels, height, width):
    return [torch.randn(batch, in_channels, height, width, dtype=torch.float16)]


def get_init_inputs(in_channels, out_channels):
    return [in_channels, out_channels]
