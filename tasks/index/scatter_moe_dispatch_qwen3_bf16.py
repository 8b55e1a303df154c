"""MoE dispatch: scatter (index_put, no accumulation) each token's row to its top-k expert-sorted slots (Qwen3-MoE)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["scatter", "index_put", "moe", "permutation", "memory-bound"],
    # perf: a 32768-token prefill batch through Qwen3-235B-A22B (hidden 4096, top-8 of 128
    # experts): 268 MB read, 2.1 GB of expert-sorted rows written, ~0.8 ms; 2.4 GB.
    "shapes": {
        "small": {"tokens": 16, "topk": 2, "hidden": 32},
        "perf": {"tokens": 32768, "topk": 8, "hidden": 4096},
    },
    "flops": "0",
    "bytes": "2 * tokens * hidden + 8 * tokens * topk + 2 * tokens * topk * hidden",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Qwen3-MoE token permutation before the grouped expert GEMM",
}


class Model(nn.Module):
    def forward(self, hidden_states, dest):
        tokens, topk = dest.shape
        out = hidden_states.new_empty(tokens * topk, hidden_states.shape[1])
        # dest is a permutation of tokens * topk slots: every row is written exactly once.
        out[dest] = hidden_states.unsqueeze(1).expand(-1, topk, -1)
        return out


def get_inputs(tokens, topk, hidden):
    hidden_states = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    dest = torch.randperm(tokens * topk, dtype=torch.int64).view(tokens, topk)
    return [hidden_states, dest]


def get_init_inputs():
    return []
