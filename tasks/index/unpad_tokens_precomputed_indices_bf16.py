"""Boolean-mask compaction of padded query states by precomputed int64 token indices (FlashAttention-2 varlen unpadding)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["index", "compaction", "unpad", "varlen", "attention", "memory-bound"],
    # perf: Llama-3-8B queries (32 heads x 128) of 32 right-padded sequences of up to 4096
    # tokens, 3/4 of them real: 805 MB of rows read and written, ~0.55 ms; 1.9 GB.
    "shapes": {
        "small": {"batch": 4, "seq": 16, "heads": 2, "head_dim": 8},
        "perf": {"batch": 32, "seq": 4096, "heads": 32, "head_dim": 128},
    },
    "flops": "0",
    "bytes": "8 * (3 * batch * seq // 4) + 2 * 2 * (3 * batch * seq // 4) * heads * head_dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "HF transformers _upad_input / flash_attn index_first_axis(q, indices_q)",
}


class Model(nn.Module):
    def forward(self, query_states, indices):
        # x[mask] without torch.nonzero: the mask's flat indices were computed once per batch.
        return query_states.flatten(0, 1)[indices]


def get_inputs(batch, seq, heads, head_dim):
    query_states = torch.randn(batch, seq, heads, head_dim, dtype=torch.bfloat16)
    # Right padding with paired pad lengths u and seq/2 - u, so exactly 3/4 of the tokens are real.
    u = torch.randint(0, seq // 2 + 1, (batch // 2,), dtype=torch.int64)
    pad = torch.cat([u, seq // 2 - u])[torch.randperm(batch)]
    mask = torch.arange(seq, dtype=torch.int64) < (seq - pad).unsqueeze(1)
    return [query_states, mask.flatten().nonzero().squeeze(1)]


def get_init_inputs():
    return []
