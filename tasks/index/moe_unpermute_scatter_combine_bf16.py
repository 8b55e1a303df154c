"""MoE un-permute and combine: scatter expert-sorted outputs to (token, slot) order, then router-weighted sum."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["scatter", "moe", "reduction"],
    # perf: a 4096-token prefill chunk of DeepSeek-V3 (hidden 7168, 8 routed experts per
    # token): 470 MB of expert outputs; eagerly ~5 GB moved through fp32 temporaries, ~2.8 ms.
    "shapes": {
        "small": {"tokens": 8, "topk": 2, "hidden": 32},
        "perf": {"tokens": 4096, "topk": 8, "hidden": 7168},
    },
    "flops": "2 * tokens * topk * hidden",
    "bytes": "2 * tokens * topk * hidden + 12 * tokens * topk + 2 * tokens * hidden",
    # Weighted sum in fp32, one rounding to bf16.
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "DeepSeek-V3 MoE token un-permutation and top-k combine",
}


class Model(nn.Module):
    def forward(self, expert_out, dest, weights):
        tokens, topk = weights.shape
        # dest is a permutation of tokens * topk rows: every row of the result is written.
        rows = torch.empty_like(expert_out).scatter_(0, dest.unsqueeze(1).expand_as(expert_out), expert_out)
        rows = rows.view(tokens, topk, -1).float()
        return (rows * weights.unsqueeze(-1)).sum(dim=1).to(torch.bfloat16)


def get_inputs(tokens, topk, hidden):
    expert_out = torch.randn(tokens * topk, hidden, dtype=torch.bfloat16)
    dest = torch.randperm(tokens * topk, dtype=torch.int64)
    weights = torch.rand(tokens, topk, dtype=torch.float32)
    return [expert_out, dest, weights / weights.sum(dim=1, keepdim=True)]


def get_init_inputs():
    return []
