"""Top-8 values and int64 expert indices of each token's fp32 router logits over 128 experts, the expert selection of a Qwen3-MoE layer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["topk", "selection", "moe", "routing", "qwen"],
    # perf: Qwen3-30B-A3B / 235B-A22B routing (128 experts, top-8) of a 32 x 16384-token prefill
    # batch. Eager: one topk kernel reading 268 MB, bound by per-row selection -> ~0.5 ms on an
    # H100; 0.33 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 256, "experts": 128, "k": 8},
        "perf": {"tokens": 524288, "experts": 128, "k": 8},
    },
    "flops": "tokens * experts",
    "bytes": "4 * tokens * experts + (4 + 8) * tokens * k",
    "source": "HF Qwen3MoeSparseMoeBlock: torch.topk(routing_weights, top_k=8, dim=-1) (softmax is monotone)",
}


class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, router_logits):
        values, indices = torch.topk(router_logits, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_inputs(tokens, experts):
    # Tie-free rows: expert j gets the normal quantile of rank (a*j + b) mod p, distinct for the
    # prime p = 2^17 - 1 > experts (a < 2^13 keeps a*j + b inside int32).
    p = 131071
    a = torch.randint(1, 8192, (tokens, 1), dtype=torch.int32)
    b = torch.randint(0, p, (tokens, 1), dtype=torch.int32)
    rank = torch.arange(experts, dtype=torch.int32).mul(a).add_(b).remainder_(p)
    u = rank.mul_(2).add_(1).to(torch.float32).div_(p).sub_(1)
    scale = 2.0**0.5 * (0.5 + torch.rand(tokens, 1, dtype=torch.float32))  # per-token logit scale
    return [u.erfinv_().mul_(scale)]


def get_init_inputs(k):
    return [k]
