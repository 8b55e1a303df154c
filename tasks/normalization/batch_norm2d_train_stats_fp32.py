"""BatchNorm2d normalising with the batch's own per-channel mean and variance (training forward) in a ResNet-50."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "float32",
    "tags": ["batchnorm", "training", "reduction", "cnn", "nchw"],
    # perf: ResNet-50 layer1 output (256 channels at 56x56) for a training batch of 256.
    "shapes": {
        "small": {"batch": 4, "channels": 16, "height": 8, "width": 8},
        "perf": {"batch": 256, "channels": 256, "height": 56, "width": 56},
    },
    "flops": "7 * batch * channels * height * width",
    "bytes": "4 * (2 * batch * channels * height * width + 2 * channels)",
    "source": "ResNet-50 layer1 bn3 (torchvision, train mode)",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        # No running statistics: the batch statistics are used even though kbench calls eval().
        self.bn = nn.BatchNorm2d(channels, eps=1e-5, track_running_stats=False, dtype=torch.float32)
        nn.init.normal_(self.bn.weight, 1.0, 0.5)
        nn.init.normal_(self.bn.bias, 0.0, 0.5)

    def forward(self, x):
        return self.bn(x)


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float32)]


def get_init_inputs(channels):
    return [channels]
