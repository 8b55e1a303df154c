"""Swin window partition: [B, H, W, C] -> [B * num_windows, window, window, C] via view + permute + copy."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["permute", "reshape", "swin", "window-attention", "memory-bound"],
    # perf: Swin-L stage 1 at 384 px (96x96 tokens, C=192, window 12), batch 256:
    # 906 MB read and written, ~0.6 ms; 1.8 GB.
    "shapes": {
        "small": {"batch": 2, "height": 16, "width": 24, "channels": 8, "window": 8},
        "perf": {"batch": 256, "height": 96, "width": 96, "channels": 192, "window": 12},
    },
    "flops": "0",
    "bytes": "2 * 2 * batch * height * width * channels",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Swin Transformer window_partition (Swin-L 384, window 12)",
}


class Model(nn.Module):
    def __init__(self, window):
        super().__init__()
        self.window = window

    def forward(self, x):
        b, h, w, c = x.shape
        ws = self.window
        x = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return x.reshape(-1, ws, ws, c)


def get_inputs(batch, height, width, channels):
    return [torch.randn(batch, height, width, channels, dtype=torch.bfloat16)]


def get_init_inputs(window):
    return [window]
