"""CLIP contrastive logits: L2-normalize image and text embeddings, cosine-similarity matmul, multiply by the learned temperature exp(logit_scale)."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "normalize", "contrastive", "clip", "temperature"],
    # perf: OpenCLIP ViT-L/14 (embed 768), 1024 local images against the all-gathered 32768
    # texts of a 32-GPU global batch. Eager: 51.5 GFLOP fp32 GEMM (~1 ms) + 0.25 GB moved; peak ~0.4 GB.
    "shapes": {
        "small": {"local_batch": 32, "global_batch": 128, "embed": 64},
        "perf": {"local_batch": 1024, "global_batch": 32768, "embed": 768},
    },
    "flops": "2 * local_batch * global_batch * embed + 3 * (local_batch + global_batch) * embed + local_batch * global_batch",
    "bytes": "4 * ((local_batch + global_batch) * embed + local_batch * global_batch)",
    "source": "open_clip ClipLoss.get_logits: logit_scale.exp() * normalize(image) @ normalize(text).T",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07), dtype=torch.float32))

    def forward(self, image_features, text_features):
        image = nn.functional.normalize(image_features, dim=-1)
        text = nn.functional.normalize(text_features, dim=-1)
        return self.logit_scale.exp() * image @ text.t()


def get_inputs(local_batch, global_batch, embed):
    # Embedding norms vary per sample (as projected features do), so the normalization matters.
    def features(rows):
        return torch.randn(rows, embed, dtype=torch.float32) * (torch.rand(rows, 1, dtype=torch.float32) + 0.5)

    return [features(local_batch), features(global_batch)]


def get_init_inputs():
    return []
