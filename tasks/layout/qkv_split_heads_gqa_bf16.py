"""Split a fused QKV projection output and permute each part to [batch, heads, seq, head_dim] (GQA prologue)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["permute", "split", "attention", "memory-bound"],
    # perf: 8 x 4096 tokens of Llama-3-70B (64 query heads, 8 KV heads, head_dim 128):
    # 671 MB read and written, ~1 ms eager.
    "shapes": {
        "small": {"batch": 2, "seq": 16, "heads": 4, "kv_heads": 2, "head_dim": 8},
        "perf": {"batch": 8, "seq": 4096, "heads": 64, "kv_heads": 8, "head_dim": 128},
    },
    "flops": "0",
    "bytes": "2 * 2 * batch * seq * (heads + 2 * kv_heads) * head_dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Llama-3-70B attention: fused qkv_proj output to per-head layout",
}


class Model(nn.Module):
    def __init__(self, heads, kv_heads, head_dim):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim

    def forward(self, qkv):
        batch, seq, _ = qkv.shape
        d = self.head_dim
        q, k, v = qkv.split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(batch, seq, self.heads, d).transpose(1, 2).contiguous()
        k = k.view(batch, seq, self.kv_heads, d).transpose(1, 2).contiguous()
        v = v.view(batch, seq, self.kv_heads, d).transpose(1, 2).contiguous()
        return q, k, v


def get_inputs(batch, seq, heads, kv_heads, head_dim):
    return [torch.randn(batch, seq, (heads + 2 * kv_heads) * head_dim, dtype=torch.bfloat16)]


def get_init_inputs(heads, kv_heads, head_dim):
    return [heads, kv_heads, head_dim]
