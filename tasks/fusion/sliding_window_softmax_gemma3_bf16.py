"""Attention probabilities with GQA key repeat, a causal sliding-window mask and an fp32 softmax in bf16 (Gemma-3 / Mistral local attention)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "softmax", "attention", "sliding-window", "mask", "gqa"],
    # perf: Gemma-3-4B local layer (8 q heads, 4 kv heads, head_dim 256, window 1024),
    # 2 sequences x 4096 tokens. Eager: 137 GFLOP fp32 GEMM (~2.7 ms) + ~7 GB moved by the score
    # passes (~2.5 ms); peak ~3 GB.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 64, "head_dim": 32, "window": 16},
        "perf": {"batch": 2, "heads": 8, "kv_heads": 4, "seq": 4096, "head_dim": 256, "window": 1024},
    },
    "flops": "2 * batch * heads * seq * seq * head_dim + 5 * batch * heads * seq * seq",
    "bytes": "2 * (batch * (heads + kv_heads) * seq * head_dim + batch * heads * seq * seq)",
    # Probabilities are ~1/window: atol far below the default so zeros cannot pass.
    "tolerance": {"atol": 1e-5, "rtol": 1e-2},
    "source": "HF Gemma3 eager_attention_forward on sliding_attention layers (query_pre_attn_scalar = head_dim)",
}


class Model(nn.Module):
    def __init__(self, head_dim, window):
        super().__init__()
        self.scale = head_dim ** -0.5
        self.window = window

    def forward(self, q, k):
        groups = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(groups, dim=1)  # HF repeat_kv
        seq = q.shape[-2]
        # Scores in fp32 from the bf16 values (as a tensor-core kernel accumulates them); HF rounds
        # q k^T to bf16 first, which moves probabilities by up to ~2% at head_dim 256.
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * self.scale
        pos = torch.arange(seq, device=q.device)
        dist = pos[:, None] - pos[None, :]  # i - j
        hidden = (dist < 0) | (dist >= self.window)
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1).to(q.dtype)


def get_inputs(batch, heads, kv_heads, seq, head_dim):
    return [
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(head_dim, window):
    return [head_dim, window]
