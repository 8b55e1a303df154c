"""Mean over H x W of a bf16 NCHW feature map, the squeeze (global average pool) of a squeeze-and-excitation block in EfficientNet."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["reduction", "spatial", "conv", "squeeze-excitation", "efficientnet"],
    # perf: EfficientNet-B7 at 600 x 600, stage-2 MBConv (48 -> 288 expanded channels at 150 x 150),
    # inference batch 128. Eager: one mean kernel reading 1.66 GB -> ~0.6 ms on an H100;
    # 1.7 GB of GPU memory.
    "shapes": {
        "small": {"batch": 2, "channels": 32, "height": 20, "width": 20},
        "perf": {"batch": 128, "channels": 288, "height": 150, "width": 150},
    },
    "flops": "batch * channels * height * width",
    "bytes": "2 * (batch * channels * height * width + batch * channels)",
    "source": "EfficientNet-B7 SqueezeExcite: x.mean((2, 3))",
}


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3))


def get_inputs(batch, channels, height, width):
    # Post-SiLU features: every (sample, channel) map has its own mean and spread.
    mean = torch.randn(batch, channels, 1, 1, dtype=torch.bfloat16)
    spread = 0.2 + torch.rand(batch, channels, 1, 1, dtype=torch.bfloat16)
    return [torch.randn(batch, channels, height, width, dtype=torch.bfloat16) * spread + mean]


def get_init_inputs():
    return []
