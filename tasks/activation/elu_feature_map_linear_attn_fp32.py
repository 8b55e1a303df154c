"""ELU feature map phi(x) = elu(x) + 1 over fp32 queries/keys, the positive kernel of linear attention (Katharopoulos et al. 2020)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 2,
    "dtype": "float32",
    "tags": ["pointwise", "elu", "attention", "linear-attention"],
    # perf: queries of 16 sequences x 4096 tokens x 32 heads of 128. Eager: elu then add,
    # 4 x 1.07 GB moved -> ~1.4 ms on an H100; 3.2 GB of GPU memory.
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64, "head_dim": 64},
        "perf": {"batch": 16, "heads": 32, "seq": 4096, "head_dim": 128},
    },
    "flops": "4 * batch * heads * seq * head_dim",
    "bytes": "2 * 4 * batch * heads * seq * head_dim",
    "source": "fast-transformers elu_feature_map: F.elu(x) + 1 (Transformers are RNNs, ICML 2020)",
}


class Model(nn.Module):
    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, q):
        return nn.functional.elu(q, alpha=self.alpha) + 1


def get_inputs(batch, heads, seq, head_dim):
    return [torch.randn(batch, heads, seq, head_dim, dtype=torch.float32) * 2]


def get_init_inputs():
    return []
