"""Stable ascending sort of the flattened int32 top-k expert ids with the int64 permutation, grouping token copies by expert for a grouped-GEMM MoE."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "int32",
    "tags": ["sort", "stable", "moe", "routing", "permutation"],
    # perf: 32 x 16384 prefill tokens, each routed to 8 of Qwen3-MoE's 128 experts: 4.2M keys.
    # Eager: one radix sort of (int32 key, int64 index) pairs, ~4 passes over 50 MB
    # -> ~0.2-0.3 ms on an H100 (small by nature); 0.2 GB of GPU memory.
    "window_exception": "a routing sort is small by nature: 4.2M keys (a 32 x 16384-token prefill, top-8 of 128 experts) measured 0.27 ms eager on an H100; a bigger batch is not a real workload",
    "shapes": {
        "small": {"tokens": 256, "top_k": 8, "experts": 128},
        "perf": {"tokens": 524288, "top_k": 8, "experts": 128},
    },
    "flops": "tokens * top_k * log2(tokens * top_k)",
    "bytes": "4 * tokens * top_k + (4 + 8) * tokens * top_k",
    "source": "MoE token permutation (e.g. Megatron-Core / vLLM): torch.sort(topk_ids.flatten(), stable=True)",
}


class Model(nn.Module):
    def forward(self, expert_ids):
        # Each expert id repeats ~tokens * top_k / experts times; stability fixes the order of equal
        # keys (ascending token copy), so the permutation is exact.
        sorted_ids, order = torch.sort(expert_ids.flatten(), stable=True)
        return sorted_ids, order


def get_inputs(tokens, top_k, experts):
    # Each token's top_k distinct experts (ranked by random router scores), as int32 ids.
    scores = torch.rand(tokens, experts, dtype=torch.float32)
    return [scores.topk(top_k, dim=-1).indices.to(torch.int32)]


def get_init_inputs():
    return []
