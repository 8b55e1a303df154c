"""torch.roll of [B, H, W, C] features by half a window along H and W, the cyclic shift of Swin shifted-window attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "float32",
    "tags": ["roll", "shift", "swin", "memory-bound"],
    # perf: SwinIR colour denoising at full resolution (1024x1024, embed dim 180, window 8,
    # shift 4): 755 MB; eager roll over two dims is two copies, ~3 GB moved, ~1 ms; 2.3 GB.
    "shapes": {
        "small": {"batch": 2, "height": 16, "width": 24, "channels": 8, "window": 8},
        "perf": {"batch": 1, "height": 1024, "width": 1024, "channels": 180, "window": 8},
    },
    "flops": "0",
    "bytes": "2 * 4 * batch * height * width * channels",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "SwinIR / Swin SwinTransformerBlock: torch.roll(x, (-shift, -shift), dims=(1, 2))",
}


class Model(nn.Module):
    def __init__(self, window):
        super().__init__()
        self.shift = window // 2

    def forward(self, x):
        return torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2))


def get_inputs(batch, height, width, channels):
    return [torch.randn(batch, height, width, channels, dtype=torch.float32)]


def get_init_inputs(window):
    return [window]
