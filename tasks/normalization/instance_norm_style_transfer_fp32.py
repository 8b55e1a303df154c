"""InstanceNorm2d with affine weight and bias (per-image, per-channel statistics), after each convolution of a fast neural style-transfer network."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["instancenorm", "reduction", "style_transfer", "cnn", "nchw"],
    # perf: first ConvLayer of the fast-neural-style TransformerNet (32 channels at full
    # resolution) on 16 images of 512x512: 537 MB in and out, ~3 passes eager (~1.6-2 GB moved):
    # ~0.6 ms on an H100, ~1.1 GB of memory.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 16, "width": 16},
        "perf": {"batch": 16, "channels": 32, "height": 512, "width": 512},
    },
    "flops": "8 * batch * channels * height * width",
    "bytes": "4 * (2 * batch * channels * height * width + 2 * channels)",
    "source": "pytorch/examples fast_neural_style TransformerNet (InstanceNorm2d(affine=True)), Johnson et al. 2016",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.InstanceNorm2d(channels, affine=True, dtype=torch.float32)
        nn.init.normal_(self.norm.weight, 1.0, 0.5)
        nn.init.normal_(self.norm.bias, 0.0, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs(batch, channels, height, width):
    # Each image and channel has its own mean and scale, as conv feature maps do.
    offset = torch.randn(batch, channels, 1, 1, dtype=torch.float32) * 2
    scale = torch.rand(batch, channels, 1, 1, dtype=torch.float32) * 2 + 0.25
    return [torch.randn(batch, channels, height, width, dtype=torch.float32) * scale + offset]


def get_init_inputs(channels):
    return [channels]
