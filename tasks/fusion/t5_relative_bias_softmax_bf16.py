"""Attention probabilities softmax(Q K^T + T5 bucketed relative-position bias) in bf16: log-spaced distance buckets, per-head bias lookup, fp32 softmax."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "softmax", "attention", "relative-position", "embedding", "t5"],
    # perf: Flan-T5-XL encoder self-attention (32 heads x d_kv 64, 32 buckets, max distance 128),
    # 32 sequences x 512 tokens. Eager: 34 GFLOP fp32 GEMM (~0.7 ms) + ~6 GB moved by the fp32
    # score passes (~2 ms); peak ~3 GB.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "seq": 64, "head_dim": 16},
        "perf": {"batch": 32, "heads": 32, "seq": 512, "head_dim": 64},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 5 * batch * heads * seq * seq",
    "bytes": "2 * (2 * batch * heads * seq * head_dim + batch * heads * seq * seq + 32 * heads)",
    # Probabilities are ~1/seq: atol far below the default so zeros cannot pass.
    "tolerance": {"atol": 1e-5, "rtol": 1e-2},
    "source": "HF T5Attention.compute_bias + _relative_position_bucket (bidirectional encoder), Flan-T5-XL",
}


def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
    # Bidirectional: half the buckets for keys after the query; exact buckets for |d| < 8, then log-spaced.
    num_buckets //= 2
    buckets = (relative_position > 0).long() * num_buckets
    distance = relative_position.abs()
    max_exact = num_buckets // 2
    log_ratio = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    if_large = (max_exact + (log_ratio * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < max_exact, distance, if_large)


class Model(nn.Module):
    def __init__(self, heads, num_buckets=32):
        super().__init__()
        self.relative_attention_bias = nn.Embedding(num_buckets, heads, dtype=torch.bfloat16)
        nn.init.normal_(self.relative_attention_bias.weight, 0.0, 1.0)

    def forward(self, q, k):
        seq = q.shape[-2]
        pos = torch.arange(seq, device=q.device)
        buckets = relative_position_bucket(pos[None, :] - pos[:, None])  # key - query
        bias = self.relative_attention_bias(buckets).permute(2, 0, 1)  # (heads, seq, seq)
        # T5 does not scale q k^T. Scores in fp32 from the bf16 values, as tensor cores accumulate.
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) + bias.float()
        return torch.softmax(scores, dim=-1).to(q.dtype)


def get_inputs(batch, heads, seq, head_dim):
    # Unscaled T5 scores: q, k sized so that q k^T has std ~2, as in a trained encoder.
    return [
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16) * (2 / head_dim ** 0.5),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(heads):
    return [heads]
