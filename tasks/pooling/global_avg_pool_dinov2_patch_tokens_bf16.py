"""Global average pooling of ViT patch tokens (class token excluded), the pooled feature of DINOv2 linear probes and timm global_pool='avg' heads."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["avgpool", "global_pool", "reduction", "vit"],
    # perf: DINOv2 ViT-L/14 features at 518x518 (1 class + 1369 patch tokens, dim 1024) for a batch
    # of 512 images: 1.44 GB read once: ~0.5 ms on an H100, ~1.5 GB of memory.
    "shapes": {
        "small": {"batch": 4, "tokens": 65, "dim": 128},
        "perf": {"batch": 512, "tokens": 1370, "dim": 1024},
    },
    "flops": "batch * tokens * dim",
    "bytes": "2 * (batch * tokens * dim + batch * dim)",
    "source": "DINOv2 linear eval (mean of x_norm_patchtokens) / timm VisionTransformer global_pool='avg'",
}


class Model(nn.Module):
    def __init__(self, num_prefix_tokens=1):
        super().__init__()
        self.num_prefix_tokens = num_prefix_tokens

    def forward(self, x):
        return x[:, self.num_prefix_tokens:].mean(dim=1)


def get_inputs(batch, tokens, dim):
    # Per-image channel offsets (trained features have them) plus token noise; the class token
    # carries much larger activations, so pooling it in by mistake is caught.
    x = torch.randn(batch, tokens, dim, dtype=torch.float32) * 4 + torch.randn(batch, 1, dim, dtype=torch.float32)
    x[:, 0] *= 50
    return [x.to(torch.bfloat16)]


def get_init_inputs():
    return []
