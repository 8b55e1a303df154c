"""Rotary position embedding applied to q and k from a cos/sin cache at per-token positions (vLLM rotary_embedding)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["rope", "attention", "gather", "llama"],
    # perf: Llama-3-8B (32 q heads, 8 kv heads, head_dim 128, theta 5e5), a 16384-token
    # continuous-batching prefill step whose tokens sit at arbitrary positions < 8192.
    "shapes": {
        "small": {"tokens": 64, "heads": 4, "kv_heads": 2, "head_dim": 32, "max_pos": 256},
        "perf": {"tokens": 16384, "heads": 32, "kv_heads": 8, "head_dim": 128, "max_pos": 8192},
    },
    "flops": "3 * tokens * (heads + kv_heads) * head_dim",
    "bytes": "4 * (2 * tokens * (heads + kv_heads) * head_dim + tokens * head_dim) + 8 * tokens",
    "source": "Llama-3 attention: neox-style RoPE on q and k (vLLM RotaryEmbedding.forward_native)",
}


class Model(nn.Module):
    def __init__(self, head_dim, max_pos, theta=500000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        freqs = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
        self.register_buffer("cos_sin_cache", torch.cat([freqs.cos(), freqs.sin()], dim=-1))
        self.head_dim = head_dim

    def _rotate(self, x, cos, sin):
        x = x.unflatten(-1, (-1, self.head_dim))
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).flatten(-2)

    def forward(self, positions, query, key):
        cos, sin = self.cos_sin_cache[positions].unsqueeze(-2).chunk(2, dim=-1)
        return self._rotate(query, cos, sin), self._rotate(key, cos, sin)


def get_inputs(tokens, heads, kv_heads, head_dim, max_pos):
    return [
        torch.randint(0, max_pos, (tokens,), dtype=torch.int64),
        torch.randn(tokens, heads * head_dim, dtype=torch.float32),
        torch.randn(tokens, kv_heads * head_dim, dtype=torch.float32),
    ]


def get_init_inputs(head_dim, max_pos):
    return [head_dim, max_pos]
