"""Per-pair cosine embedding loss: 1 - cos(x1, x2) for similar pairs (+1), max(0, cos - margin) for dissimilar pairs (-1), as in Siamese embedding training and DistilBERT's hidden-state alignment."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["cosine_embedding", "reduction", "embedding", "distillation"],
    # perf: 256 sequences x 512 tokens of 768-d hidden states (BERT-base / DistilBERT width) paired
    # with their targets (403 MB per input); eager runs 3 product-then-sum passes plus pointwise
    # ops (~4 GB moved): ~1.3 ms on an H100, ~1.3 GB of memory.
    "shapes": {
        "small": {"pairs": 64, "dim": 128},
        "perf": {"pairs": 131072, "dim": 768},
    },
    "flops": "6 * pairs * dim",
    "bytes": "2 * 4 * pairs * dim + 8 * pairs + 4 * pairs",
    "source": "torch.nn.CosineEmbeddingLoss(margin=0.2, reduction='none'); DistilBERT distillation (cosine loss on hidden states)",
}


class Model(nn.Module):
    def __init__(self, margin=0.2):
        super().__init__()
        self.margin = margin

    def forward(self, x1, x2, y):
        return nn.functional.cosine_embedding_loss(x1, x2, y, margin=self.margin, reduction="none")


def get_inputs(pairs, dim):
    # Pairs with cosine similarities spread over (-1, 1), and rows of different norms.
    x1 = torch.randn(pairs, dim, dtype=torch.float32) * (torch.rand(pairs, 1, dtype=torch.float32) + 0.5)
    c = torch.rand(pairs, 1, dtype=torch.float32) * 2 - 1
    x2 = c * x1 + (1 - c * c).sqrt() * torch.randn(pairs, dim, dtype=torch.float32) * x1.norm(dim=1, keepdim=True) / dim ** 0.5
    y = torch.randint(0, 2, (pairs,), dtype=torch.int64) * 2 - 1
    return [x1, x2, y]


def get_init_inputs():
    return []
