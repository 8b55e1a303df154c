"""Per-token smooth-L1 regression of student predictions onto teacher targets, summed over features and scaled by 1/sqrt(dim) (data2vec)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["smooth_l1", "huber", "reduction", "self_supervised"],
    # perf: ViT-L width 1024, 64 images x 10 mask clones x 157 masked of 196 patches (data2vec-style multi-mask).
    "shapes": {
        "small": {"tokens": 64, "dim": 128},
        "perf": {"tokens": 100480, "dim": 1024},
    },
    "flops": "5 * tokens * dim",
    "bytes": "2 * 4 * tokens * dim + 4 * tokens",
    "source": "fairseq data2vec: smooth_l1_loss(x, y, reduction='none', beta).sum(-1) / sqrt(dim)",
}


class Model(nn.Module):
    def __init__(self, beta=0.25):
        super().__init__()
        self.beta = beta

    def forward(self, pred, target):
        loss = nn.functional.smooth_l1_loss(pred, target, reduction="none", beta=self.beta)
        return loss.sum(dim=-1) * pred.shape[-1] ** -0.5


def get_inputs(tokens, dim):
    return [torch.randn(tokens, dim, dtype=torch.float32), torch.randn(tokens, dim, dtype=torch.float32)]


def get_init_inputs():
    return []
