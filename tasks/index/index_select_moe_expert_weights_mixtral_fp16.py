"""index_select of each decode token's top-2 expert w1 matrices by int64 expert ids (gpt-fast Mixtral MoE decode)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "float16",
    "tags": ["index_select", "moe", "decode", "weights", "memory-bound"],
    # perf: Mixtral-8x7B w1 (8 experts x 14336 x 4096, 940 MB), decode batch 4 x top-2:
    # 8 expert matrices (940 MB) read and written, ~0.65 ms; 1.9 GB.
    "shapes": {
        "small": {"experts": 4, "intermediate": 32, "hidden": 16, "tokens": 3, "topk": 2},
        "perf": {"experts": 8, "intermediate": 14336, "hidden": 4096, "tokens": 4, "topk": 2},
    },
    "flops": "0",
    "bytes": "8 * tokens * topk + 2 * 2 * tokens * topk * intermediate * hidden",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "gpt-fast Mixtral ConditionalFeedForward: w1_weights = self.w1[expert_indices]",
}


class Model(nn.Module):
    def __init__(self, experts, intermediate, hidden):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(experts, intermediate, hidden, dtype=torch.float16))

    def forward(self, expert_ids):
        selected = self.w1.index_select(0, expert_ids.flatten())
        return selected.view(*expert_ids.shape, *self.w1.shape[1:])


def get_inputs(tokens, experts, topk):
    # Each token's top-k experts are distinct; tokens may share experts.
    return [torch.rand(tokens, experts, dtype=torch.float32).argsort(dim=-1)[:, :topk]]


def get_init_inputs(experts, intermediate, hidden):
    return [experts, intermediate, hidden]
