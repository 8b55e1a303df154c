"""Causal grouped-query attention in plain ops (32 query heads share 8 K/V heads), the prefill attention of Llama-3-8B."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["attention", "gqa", "causal", "softmax", "gemm", "llama"],
    # perf: Llama-3-8B prefill, 4 sequences x 2048 tokens, 32 query / 8 KV heads of dim 128.
    "shapes": {
        "small": {"batch": 1, "q_heads": 4, "kv_heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 4, "q_heads": 32, "kv_heads": 8, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch * q_heads * seq * seq * head_dim + 3 * batch * q_heads * seq * seq",
    "bytes": "2 * (2 * batch * q_heads * seq * head_dim + 2 * batch * kv_heads * seq * head_dim)",
    "source": "Llama-3-8B LlamaAttention (eager path with repeat_kv)",
}


class Model(nn.Module):
    def forward(self, q, k, v):
        group, seq = q.shape[1] // k.shape[1], q.shape[-2]
        k = k.repeat_interleave(group, dim=1)  # query head h reads K/V head h // group
        v = v.repeat_interleave(group, dim=1)
        s = (q.float() * q.shape[-1] ** -0.5) @ k.float().transpose(-2, -1)
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu_(1)
        s = torch.softmax(s.masked_fill_(future, float("-inf")), dim=-1)
        return s.to(q.dtype) @ v


def get_inputs(batch, q_heads, kv_heads, seq, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, q_heads, seq, head_dim, dtype=torch.bfloat16) * 2
    k = torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16)
    v = torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
