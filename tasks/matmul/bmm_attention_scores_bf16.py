"""Batched bf16 GEMM Q @ K^T over (batch x heads): the attention-score product of unfused attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["bmm", "batched", "attention"],
    # perf: batch 4 x 40 heads, 2048 tokens, head_dim 128 (Llama-2-13B); 172 GFLOP plus a
    # 1.3 GB score matrix written: ~0.6 ms.
    "shapes": {
        "small": {"batch_heads": 4, "seq": 32, "head_dim": 16},
        "perf": {"batch_heads": 160, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch_heads * seq * seq * head_dim",
    "bytes": "2 * (2 * batch_heads * seq * head_dim + batch_heads * seq * seq)",
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "Llama-2-13B eager attention scores",
}


class Model(nn.Module):
    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2))


def get_inputs(batch_heads, seq, head_dim):
    return [
        torch.randn(batch_heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch_heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return []
