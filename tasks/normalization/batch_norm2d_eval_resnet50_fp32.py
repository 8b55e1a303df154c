"""BatchNorm2d in inference mode (running statistics plus affine), after a ResNet-50 layer1 convolution."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["batchnorm", "inference", "cnn", "nchw"],
    # perf: ResNet-50 layer1 output (256 channels at 56x56) for an inference batch of 256.
    "shapes": {
        "small": {"batch": 2, "channels": 16, "height": 8, "width": 8},
        "perf": {"batch": 256, "channels": 256, "height": 56, "width": 56},
    },
    "flops": "2 * batch * channels * height * width",
    "bytes": "4 * (2 * batch * channels * height * width + 4 * channels)",
    "source": "ResNet-50 layer1 bn3 (torchvision, eval)",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.bn.weight, 1.0, 0.5)
        nn.init.normal_(self.bn.bias, 0.0, 0.5)
        self.bn.running_mean.normal_(0.0, 0.5)
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return self.bn(x)  # kbench runs the model in eval mode: running statistics are used


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs(channels):
    return [channels]
