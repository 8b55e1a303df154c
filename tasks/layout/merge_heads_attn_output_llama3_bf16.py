"""Merge attention heads: transpose [batch, heads, seq, head_dim] to [batch, seq, heads * head_dim] before o_proj."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["transpose", "reshape", "attention", "memory-bound"],
    # perf: Llama-3-8B attention output (32 heads x 128), 32 sequences x 4096 tokens:
    # 1.07 GB read and written, ~0.7 ms; 2.1 GB.
    "shapes": {
        "small": {"batch": 2, "heads": 4, "seq": 12, "head_dim": 8},
        "perf": {"batch": 32, "heads": 32, "seq": 4096, "head_dim": 128},
    },
    "flops": "0",
    "bytes": "2 * 2 * batch * heads * seq * head_dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Llama attention: attn_output.transpose(1, 2).reshape(bsz, q_len, -1)",
}


class Model(nn.Module):
    def forward(self, attn_output):
        batch, heads, seq, head_dim = attn_output.shape
        return attn_output.transpose(1, 2).reshape(batch, seq, heads * head_dim)


def get_inputs(batch, heads, seq, head_dim):
    return [torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
