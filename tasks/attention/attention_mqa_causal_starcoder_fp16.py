"""Causal multi-query attention (all query heads share one K/V head) in plain ops with fp32 scores, the prefill attention of StarCoder."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "float16",
    "tags": ["attention", "mqa", "causal", "softmax", "gemm", "starcoder"],
    # perf: StarCoder-15B prefill (48 query heads x 128, 1 K/V head), 2 sequences x 2048 tokens.
    # Eager: 1.6 GB of fp32 scores (fp32 QK^T ~2 ms, ~11 GB moved by mask/softmax/cast ~4 ms):
    # ~6 ms on an H100, ~4 GB of memory.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "seq": 64, "head_dim": 32},
        "perf": {"batch": 2, "heads": 48, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 3 * batch * heads * seq * seq",
    "bytes": "2 * (2 * batch * heads * seq * head_dim + 2 * batch * seq * head_dim)",
    "source": "HF GPTBigCodeAttention (multi_query=True, eager path), StarCoder-15B",
}


class Model(nn.Module):
    def forward(self, q, k, v):
        # q: [batch, heads, seq, head_dim]; k, v: [batch, 1, seq, head_dim], broadcast over heads.
        seq = q.shape[-2]
        s = (q.float() * q.shape[-1] ** -0.5) @ k.float().transpose(-2, -1)
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu_(1)
        s = torch.softmax(s.masked_fill_(future, float("-inf")), dim=-1)
        return s.to(q.dtype) @ v


def get_inputs(batch, heads, seq, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.float16) * 2
    k = torch.randn(batch, 1, seq, head_dim, dtype=torch.float16)
    v = torch.randn(batch, 1, seq, head_dim, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs():
    return []
