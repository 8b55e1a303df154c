"""Materialized NCHW -> NHWC permute of fp16 conv activations (channels-last conversion for Tensor Core convolutions)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float16",
    "tags": ["permute", "channels-last", "conv", "memory-bound"],
    # perf: SDXL VAE decoder last up-block activations (128 channels at 1024x1024), 4 images:
    # 1.07 GB read and written, ~0.7 ms at ~3 TB/s (eager permute copy ~1-1.5 ms); 2.1 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 8, "height": 12, "width": 10},
        "perf": {"batch": 4, "channels": 128, "height": 1024, "width": 1024},
    },
    "flops": "0",
    "bytes": "2 * 2 * batch * channels * height * width",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "SDXL VAE decoder activations converted to NHWC for cuDNN/TensorRT convolutions",
}


class Model(nn.Module):
    def forward(self, x):
        return x.permute(0, 2, 3, 1).contiguous()


def get_inputs(batch, channels, height, width):
    return [torch.randn(batch, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return []
