"""SigLIP sigmoid loss: binary cross-entropy with logits on the scaled and biased image-text similarity matrix (positives on the diagonal), per image."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["bce_with_logits", "sigmoid", "reduction", "contrastive", "clip"],
    # perf: a SigLIP batch of 8192 image-text pairs (full 8192 x 8192 similarity matrix on one GPU).
    "shapes": {
        "small": {"pairs": 64},
        "perf": {"pairs": 8192},
    },
    "flops": "10 * pairs * pairs",
    "bytes": "4 * pairs * pairs + 4 * pairs",
    "source": "SigLIP (Zhai et al. 2023), open_clip SigLipLoss",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        # SigLIP's initialisation: temperature t' = log 10, bias b = -10.
        self.logit_scale = nn.Parameter(torch.tensor(math.log(10.0), dtype=torch.float32))
        self.logit_bias = nn.Parameter(torch.tensor(-10.0, dtype=torch.float32))

    def forward(self, similarity):
        logits = similarity * self.logit_scale.exp() + self.logit_bias
        labels = torch.eye(logits.shape[0], dtype=logits.dtype, device=logits.device)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="none")
        return loss.sum(dim=-1)


def get_inputs(pairs):
    # Cosine similarities of normalised image and text embeddings lie in [-1, 1].
    return [torch.rand(pairs, pairs, dtype=torch.float32) * 2 - 1]


def get_init_inputs():
    return []
