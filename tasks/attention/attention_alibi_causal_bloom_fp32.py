"""Causal attention with ALiBi linear position biases (head h adds -slope_h * (i - j) to its scores) in fp32, the self-attention of BLOOM."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "float32",
    "tags": ["attention", "alibi", "causal", "softmax", "gemm", "bloom"],
    # perf: BLOOM-560m (16 heads x 64) on 4 sequences x 2048 tokens. Eager: two fp32 GEMMs
    # (~1.4 ms) and ~9 GB moved over 1.07 GB score tensors (~3 ms): ~4.5 ms on an H100,
    # ~2.5 GB of memory.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "seq": 64, "head_dim": 32},
        "perf": {"batch": 4, "heads": 16, "seq": 2048, "head_dim": 64},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 5 * batch * heads * seq * seq",
    "bytes": "4 * (4 * batch * heads * seq * head_dim + heads)",
    "source": "ALiBi (Press et al. 2022) as in HF BloomAttention, BLOOM-560m",
}


class Model(nn.Module):
    def __init__(self, heads):
        super().__init__()
        # Geometric slopes 2^(-8 (h + 1) / heads), as in the ALiBi paper for a power-of-2 head count.
        slopes = 2.0 ** (-8.0 * torch.arange(1, heads + 1, dtype=torch.float32) / heads)
        self.register_buffer("slopes", slopes)

    def forward(self, q, k, v):
        seq = q.shape[-2]
        s = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
        pos = torch.arange(seq, device=q.device)
        # i - j: how far back key j lies (BLOOM adds slope * j, equal up to a per-row constant).
        dist = (pos[:, None] - pos[None, :]).to(q.dtype)
        s = s - self.slopes[:, None, None] * dist
        s = s.masked_fill_(dist < 0, float("-inf"))
        return torch.softmax(s, dim=-1) @ v


def get_inputs(batch, heads, seq, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.float32) * 2
    k = torch.randn(batch, heads, seq, head_dim, dtype=torch.float32)
    v = torch.randn(batch, heads, seq, head_dim, dtype=torch.float32)
    return [q, k, v]


def get_init_inputs(heads):
    return [heads]
