"""Per-sample MSE between predicted and target video latents, weighted by min-SNR timestep weights (diffusion training loss)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["mse", "reduction", "diffusion", "video"],
    # perf: 32 Wan2.1 latents of 81-frame 720p clips (16 channels x 21 frames x 90 x 160).
    "shapes": {
        "small": {"batch": 2, "channels": 4, "frames": 3, "height": 8, "width": 8},
        "perf": {"batch": 32, "channels": 16, "frames": 21, "height": 90, "width": 160},
    },
    "flops": "3 * batch * channels * frames * height * width",
    "bytes": "2 * 4 * batch * channels * frames * height * width + 2 * 4 * batch",
    "source": "diffusers training scripts: mse_loss(reduction='none').mean(dims) * min-SNR weights",
}


class Model(nn.Module):
    def forward(self, pred, target, snr_weight):
        per_sample = nn.functional.mse_loss(pred, target, reduction="none").mean(dim=(1, 2, 3, 4))
        return per_sample * snr_weight


def get_inputs(batch, channels, frames, height, width):
    shape = (batch, channels, frames, height, width)
    return [
        torch.randn(shape, dtype=torch.float32),
        torch.randn(shape, dtype=torch.float32),
        torch.rand(batch, dtype=torch.float32) * 0.9 + 0.1,  # min(SNR, gamma) / SNR lies in (0, 1]
    ]


def get_init_inputs():
    return []
