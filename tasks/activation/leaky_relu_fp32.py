"""Leaky ReLU with slope 0.2 over a convolutional feature map, as in StyleGAN2's synthesis and discriminator layers."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "conv", "gan"],
    # perf: StyleGAN2 config-f at 256x256 (128 channels), batch 32.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 32, "width": 32},
        "perf": {"batch": 32, "channels": 128, "height": 256, "width": 256},
    },
    "flops": "2 * batch * channels * height * width",
    "bytes": "2 * 4 * batch * channels * height * width",
    "source": "StyleGAN2 leaky ReLU",
}


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.leaky_relu(x, negative_slope=0.2)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs():
    return []
