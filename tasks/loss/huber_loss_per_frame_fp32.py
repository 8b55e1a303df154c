"""Per-sample Huber loss (delta 1): elementwise quadratic-then-linear error averaged over each frame, a robust pixel regression loss for video restoration training."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["huber", "reduction", "regression", "video"],
    # perf: 64 predicted vs target 720p RGB frames (3 x 720 x 1280, 708 MB per tensor); eager
    # huber_loss + mean move ~2.8 GB: ~1 ms on an H100, ~2.2 GB of memory.
    "shapes": {
        "small": {"batch": 4, "channels": 3, "height": 16, "width": 16},
        "perf": {"batch": 64, "channels": 3, "height": 720, "width": 1280},
    },
    "flops": "5 * batch * channels * height * width",
    "bytes": "2 * 4 * batch * channels * height * width + 4 * batch",
    "source": "torch.nn.HuberLoss(reduction='none', delta=1.0) averaged per sample (robust pixel loss for restoration / frame interpolation)",
}


class Model(nn.Module):
    def __init__(self, delta=1.0):
        super().__init__()
        self.delta = delta

    def forward(self, pred, target):
        loss = nn.functional.huber_loss(pred, target, reduction="none", delta=self.delta)
        return loss.mean(dim=(1, 2, 3))


def get_inputs(batch, channels, height, width):
    shape = (batch, channels, height, width)
    # Errors of different sizes per sample, so that both the quadratic and the linear branch matter.
    err_scale = torch.rand(batch, 1, 1, 1, dtype=torch.float32) * 2 + 0.2
    target = torch.randn(shape, dtype=torch.float32)
    pred = target + torch.randn(shape, dtype=torch.float32) * err_scale
    return [pred, target]


def get_init_inputs():
    return []
