"""Three-input fused multiply-add z = mean + std * noise in fp16, the reparameterised posterior sample of a latent-diffusion VAE encoder."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "fma", "addcmul", "vae", "diffusion"],
    # perf: HunyuanVideo causal-3D VAE latents of 129-frame 720p clips (16 x 33 x 90 x 160),
    # batch 32 while caching latents for training. Eager: one addcmul kernel, 4 x 487 MB moved
    # -> ~0.65 ms on an H100; 1.95 GB of GPU memory.
    "shapes": {
        "small": {"batch": 1, "channels": 4, "frames": 3, "height": 16, "width": 16},
        "perf": {"batch": 32, "channels": 16, "frames": 33, "height": 90, "width": 160},
    },
    "flops": "2 * batch * channels * frames * height * width",
    "bytes": "4 * 2 * batch * channels * frames * height * width",
    "source": "diffusers DiagonalGaussianDistribution.sample(): mean + std * randn",
}


class Model(nn.Module):
    def forward(self, mean, std, noise):
        return torch.addcmul(mean, std, noise)


def get_inputs(batch, channels, frames, height, width):
    shape = (batch, channels, frames, height, width)
    return [
        torch.randn(shape, dtype=torch.float16),
        # std = exp(logvar / 2) with logvar clamped to [-30, 20]; trained VAEs give small stds.
        torch.rand(shape, dtype=torch.float16) * 0.5 + 0.01,
        torch.randn(shape, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
