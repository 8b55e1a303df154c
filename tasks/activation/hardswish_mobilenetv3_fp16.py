"""Hardswish x * relu6(x + 3) / 6 over an fp16 NCHW feature map, the activation of MobileNetV3's stem and deeper bottlenecks."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "conv", "mobilenet", "segmentation"],
    # perf: MobileNetV3-Large stem output (16 channels at stride 2) of LR-ASPP on full-resolution
    # 1024 x 2048 Cityscapes frames, batch 64. Eager: one hardswish kernel, 2 x 1.07 GB moved
    # -> ~0.7 ms on an H100; 2.15 GB of GPU memory.
    "shapes": {
        "small": {"batch": 2, "channels": 16, "height": 32, "width": 32},
        "perf": {"batch": 64, "channels": 16, "height": 512, "width": 1024},
    },
    "flops": "5 * batch * channels * height * width",
    "bytes": "2 * 2 * batch * channels * height * width",
    "source": "MobileNetV3-Large (Howard et al. 2019) nn.Hardswish, torchvision lraspp_mobilenet_v3_large",
}


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.hardswish(x)


def get_inputs(batch, channels, height, width):
    # Post-BatchNorm activations, std 3, so the three pieces (0, quadratic, identity) all occur.
    return [torch.randn(batch, channels, height, width, dtype=torch.float16) * 3]


def get_init_inputs():
    return []
