"""F.unfold (im2col) of 3x3 padded patches of fp16 activations, the lowering of a ResNet-50 3x3 conv to a GEMM."""

import torch
import torch.nn as nn
import torch.nn.functional as F

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float16",
    "tags": ["unfold", "im2col", "conv", "memory-bound"],
    # perf: input of a ResNet-50 layer1 3x3 conv (64 channels at 56x56), batch 512: 206 MB read,
    # 9x as much (1.85 GB) written, ~0.7 ms; 2.1 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 4, "height": 10, "width": 12},
        "perf": {"batch": 512, "channels": 64, "height": 56, "width": 56},
    },
    "flops": "0",
    "bytes": "2 * batch * channels * height * width + 2 * 9 * batch * channels * height * width",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "explicit-GEMM convolution: im2col of ResNet-50 layer1 conv2 (3x3, stride 1, pad 1)",
}


class Model(nn.Module):
    def forward(self, x):
        return F.unfold(x, kernel_size=3, padding=1)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return []
