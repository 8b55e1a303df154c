"""Max pooling over the sequence axis (window 2, stride 2, ceil mode) that halves the hidden states between Funnel-Transformer blocks."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "pooling",
    "level": 1,
    "dtype": "float32",
    "tags": ["maxpool", "window", "sequence", "transformer"],
    # perf: Funnel-Transformer large (d_model 1024) first-block output, 512 sequences x 511
    # tokens (odd length: ceil mode keeps a partial last window): 1.07 GB in, 537 MB out; eager
    # CUDA also writes int64 indices (1.07 GB) and may copy the transposed view: ~1-1.5 ms on an
    # H100, ~2.7-3.8 GB of memory.
    "shapes": {
        "small": {"batch": 2, "seq": 33, "dim": 64},
        "perf": {"batch": 512, "seq": 511, "dim": 1024},
    },
    "flops": "batch * (seq // 2) * dim",
    "bytes": "4 * (batch * seq * dim + batch * ((seq + 1) // 2) * dim)",
    "source": "HF FunnelAttentionStructure.pool_tensor with pooling_type='max' (Dai et al. 2020)",
}


class Model(nn.Module):
    def forward(self, x):
        # x: [batch, seq, dim] -> [batch, ceil(seq / 2), dim]
        pooled = nn.functional.max_pool1d(x.transpose(1, 2), kernel_size=2, stride=2, ceil_mode=True)
        return pooled.transpose(1, 2)


def get_inputs(batch, seq, dim):
    return [torch.randn(batch, seq, dim, dtype=torch.float32)]


def get_init_inputs():
    return []
