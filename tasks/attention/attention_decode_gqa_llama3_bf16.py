"""Single-query (decode-step) grouped-query attention over a long bf16 KV cache, as in Llama-3-8B token generation."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["attention", "decode", "gqa", "kv_cache", "memory_bound", "llama"],
    # perf: Llama-3-8B decode, 32 concurrent sequences with 16k-token KV caches (8 KV heads x 128).
    "shapes": {
        "small": {"batch": 2, "q_heads": 4, "kv_heads": 2, "kv_len": 128, "head_dim": 32},
        "perf": {"batch": 32, "q_heads": 32, "kv_heads": 8, "kv_len": 16384, "head_dim": 128},
    },
    "flops": "4 * batch * q_heads * kv_len * head_dim + 5 * batch * q_heads * kv_len",
    "bytes": "2 * (2 * batch * kv_heads * kv_len * head_dim + 2 * batch * q_heads * head_dim)",
    "source": "Llama-3-8B generation step (flash-decoding / paged-attention workload)",
}


class Model(nn.Module):
    def forward(self, q, k_cache, v_cache):
        batch, q_heads, _, head_dim = q.shape
        kv_heads = k_cache.shape[1]
        # The q heads that share a KV head form one group: query head h reads KV head h // group.
        qg = q.view(batch, kv_heads, q_heads // kv_heads, head_dim).float() * head_dim ** -0.5
        p = torch.softmax(qg @ k_cache.float().transpose(-2, -1), dim=-1)
        return (p.to(q.dtype) @ v_cache).view(batch, q_heads, 1, head_dim)


def get_inputs(batch, q_heads, kv_heads, kv_len, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, q_heads, 1, head_dim, dtype=torch.bfloat16) * 2
    k_cache = torch.randn(batch, kv_heads, kv_len, head_dim, dtype=torch.bfloat16)
    v_cache = torch.randn(batch, kv_heads, kv_len, head_dim, dtype=torch.bfloat16)
    return [q, k_cache, v_cache]


def get_init_inputs():
    return []
