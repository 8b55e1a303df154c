"""Attention probabilities softmax(Q K^T / sqrt(d) + ALiBi bias, causal) in fp16 with an fp32 softmax, as in MPT/BLOOM eager attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["gemm", "softmax", "attention", "alibi", "mask"],
    # perf: MPT-7B (32 heads x head_dim 128, ALiBi, no RoPE), 2 sequences x 2048 tokens.
    # Eager: ~13 GB moved by the fp32 score and bias passes (~4.5 ms); peak ~3 GB.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "seq": 64, "head_dim": 32},
        "perf": {"batch": 2, "heads": 32, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 7 * batch * heads * seq * seq",
    "bytes": "2 * (2 * batch * heads * seq * head_dim + batch * heads * seq * seq) + 4 * heads",
    # Probabilities are ~1/seq: atol must be far below the default 1e-2 so zeros cannot pass.
    "tolerance": {"atol": 1e-5, "rtol": 1e-2},
    "source": "MPT-7B scaled_multihead_dot_product_attention / BLOOM attention with ALiBi (alibi_bias_max=8)",
}


class Model(nn.Module):
    def __init__(self, heads, head_dim):
        super().__init__()
        # MPT _gen_alibi_slopes(n_heads, alibi_bias_max=8): slope_h = 2^(-8 h / n_heads), h = 1..n.
        self.register_buffer("slopes", 2.0 ** (-8.0 * torch.arange(1, heads + 1, dtype=torch.float32) / heads))
        self.scale = head_dim ** -0.5

    def forward(self, q, k):
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-1, -2)).float() * self.scale
        pos = torch.arange(seq, device=q.device)
        rel = (pos[None, :] - pos[:, None]).float()  # j - i: <= 0 on and below the diagonal
        scores = scores + self.slopes[:, None, None] * rel
        scores = scores.masked_fill(rel > 0, float("-inf"))
        return torch.softmax(scores, dim=-1).to(q.dtype)


def get_inputs(batch, heads, seq, head_dim):
    return [
        torch.randn(batch, heads, seq, head_dim, dtype=torch.float16),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.float16),
    ]


def get_init_inputs(heads, head_dim):
    return [heads, head_dim]
