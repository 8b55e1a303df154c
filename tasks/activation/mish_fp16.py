"""Mish x * tanh(softplus(x)) over an fp16 convolutional feature map, the activation of YOLOv4's CSPDarknet53 backbone."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "conv", "detection"],
    # perf: YOLOv4 at 608x608, first stage (32 channels at full resolution), batch 32.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 32, "width": 32},
        "perf": {"batch": 32, "channels": 32, "height": 608, "width": 608},
    },
    "flops": "8 * batch * channels * height * width",
    "bytes": "2 * 2 * batch * channels * height * width",
    "source": "YOLOv4 CSPDarknet53 Mish",
}


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.mish(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return []
