"""Concat per-head no-RoPE keys with the shared RoPE key broadcast over heads (DeepSeek-V2/V3 MLA)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["concat", "broadcast", "attention", "mla", "memory-bound"],
    # perf: 4 x 4096 prefill tokens of DeepSeek-V3 (128 heads, 128 no-RoPE + 64 RoPE dims):
    # 537 MB read, 805 MB written, ~1.4 ms eager.
    "shapes": {
        "small": {"tokens": 8, "heads": 4, "nope_dim": 16, "rope_dim": 8},
        "perf": {"tokens": 16384, "heads": 128, "nope_dim": 128, "rope_dim": 64},
    },
    "flops": "0",
    "bytes": "2 * (tokens * heads * nope_dim + tokens * rope_dim + tokens * heads * (nope_dim + rope_dim))",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "DeepSeek-V3 MLA key assembly in prefill",
}


class Model(nn.Module):
    def forward(self, k_nope, k_pe):
        return torch.cat([k_nope, k_pe.expand(-1, k_nope.shape[1], -1)], dim=-1)


def get_inputs(tokens, heads, nope_dim, rope_dim):
    return [
        torch.randn(tokens, heads, nope_dim, dtype=torch.bfloat16),
        torch.randn(tokens, 1, rope_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return []
