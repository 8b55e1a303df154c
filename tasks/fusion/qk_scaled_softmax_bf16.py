"""Attention probabilities softmax(Q K^T / sqrt(d)) in bf16 with an fp32 softmax, as in HF eager bidirectional attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "softmax", "attention"],
    # perf: 32 heads x head_dim 128 (Llama-7B class widths), 2 sequences x 2048 tokens,
    # no mask (encoder / prefix-LM style).
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 2, "heads": 32, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 5 * batch * heads * seq * seq",
    "bytes": "2 * (2 * batch * heads * seq * head_dim + batch * heads * seq * seq)",
    # Probabilities are ~1/seq, so atol must be small; rtol 2e-2 because the reference rounds
    # the scores to bf16 before the softmax (up to ~1% relative on the largest probabilities),
    # which an fp32-accumulating fused kernel does not.
    "tolerance": {"atol": 1e-5, "rtol": 2e-2},
    "source": "HF eager_attention_forward (scaling applied in fp32): softmax(q k^T * scaling, dtype=float32)",
}


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * self.scale
        return torch.softmax(scores, dim=-1).to(q.dtype)


def get_inputs(batch, heads, seq, head_dim):
    return [
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(head_dim):
    return [head_dim]
