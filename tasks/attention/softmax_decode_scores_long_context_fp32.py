"""Softmax over the key axis of fp32 decode-step attention scores [batch, heads, 1, kv_len] (one long row per head), as in eager single-token generation."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 1,
    "dtype": "float32",
    "tags": ["softmax", "reduction", "attention", "decode", "long_context"],
    # perf: Llama-3.1-70B decode (64 query heads) for 32 sequences at the full 128k context:
    # 2048 rows of 131072 scores (1.07 GB in and out): ~0.7 ms on an H100, ~2.2 GB of memory.
    "shapes": {
        "small": {"batch": 2, "heads": 4, "kv_len": 512},
        "perf": {"batch": 32, "heads": 64, "kv_len": 131072},
    },
    "flops": "5 * batch * heads * kv_len",
    "bytes": "2 * 4 * batch * heads * kv_len",
    # Probabilities are ~1/kv_len (7.6e-6 at 128k) with a long tail far below that, so the default
    # atol (1e-4) would accept zeros for most entries; atol is tightened to 1e-9 so that the
    # relative bound governs every entry that matters.
    "tolerance": {"atol": 1e-9, "rtol": 1e-4},
    "source": "HF eager attention at decode: softmax(attn_weights, dim=-1, dtype=torch.float32) with q_len 1",
}


class Model(nn.Module):
    def forward(self, scores):
        return torch.softmax(scores, dim=-1)


def get_inputs(batch, heads, kv_len):
    # Scores with std ~2 per head, as for trained q/k: the distribution is far from uniform.
    return [torch.randn(batch, heads, 1, kv_len, dtype=torch.float32) * 2]


def get_init_inputs():
    return []
