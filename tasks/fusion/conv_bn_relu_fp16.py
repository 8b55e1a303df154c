"""Conv2d 7x7/2 + BatchNorm (inference, running stats) + ReLU in fp16: the ResNet-50 stem."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv", "batchnorm", "relu", "cnn"],
    # perf: ResNet-50 stem (3 -> 64 channels, 7x7 stride 2) on a batch of 256 224x224 images.
    "shapes": {
        "small": {"batch": 2, "in_ch": 3, "out_ch": 8, "size": 32},
        "perf": {"batch": 256, "in_ch": 3, "out_ch": 64, "size": 224},
    },
    "flops": "2 * batch * out_ch * in_ch * 49 * (size // 2) ** 2 + 4 * batch * out_ch * (size // 2) ** 2",
    "bytes": "2 * (batch * in_ch * size ** 2 + out_ch * in_ch * 49 + 4 * out_ch + batch * out_ch * (size // 2) ** 2)",
    "source": "torchvision ResNet-50 conv1 + bn1 + relu (eval mode)",
}


class Model(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 7, stride=2, padding=3, bias=False, dtype=torch.float16)
        self.bn = nn.BatchNorm2d(out_ch, dtype=torch.float16)
        # Trained-looking statistics so that every BatchNorm tensor matters.
        nn.init.normal_(self.bn.weight, 1.0, 0.1)
        nn.init.normal_(self.bn.bias, 0.0, 0.1)
        nn.init.normal_(self.bn.running_mean, 0.0, 0.1)
        nn.init.uniform_(self.bn.running_var, 0.5, 1.5)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs(batch, in_ch, size):
    return [torch.randn(batch, in_ch, size, size, dtype=torch.float16)]


def get_init_inputs(in_ch, out_ch):
    return [in_ch, out_ch]
