"""torch.take_along_dim of top-k attentive-token indices into ViT patch tokens (EViT token pruning)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "float32",
    "tags": ["take_along_dim", "gather", "topk", "token-pruning", "vit", "memory-bound"],
    # perf: ViT-L/16 at 384 px (576 patch tokens, width 1024), batch 512, keep rate 0.7 (403
    # tokens): 1.2 GB of tokens, 845 MB gathered and written, ~0.6 ms; 2.1 GB.
    "shapes": {
        "small": {"batch": 2, "tokens": 16, "dim": 32, "keep": 11},
        "perf": {"batch": 512, "tokens": 576, "dim": 1024, "keep": 403},
    },
    "flops": "0",
    "bytes": "8 * batch * keep + 2 * 4 * batch * keep * dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "EViT (Liang et al. 2022): keep the top-k tokens by CLS attention",
}


class Model(nn.Module):
    def forward(self, x, topk_idx):
        # The [batch, keep, 1] indices broadcast over the feature dimension.
        return torch.take_along_dim(x, topk_idx.unsqueeze(-1), dim=1)


def get_inputs(batch, tokens, dim, keep):
    x = torch.randn(batch, tokens, dim, dtype=torch.float32)
    # Distinct token positions in score order, as topk(cls_attn, keep) returns them.
    topk_idx = torch.rand(batch, tokens, dtype=torch.float32).argsort(dim=-1)[:, :keep]
    return [x, topk_idx]


def get_init_inputs():
    return []
