"""Mixture-of-Depths residual update: index_add router-weighted block outputs into the selected tokens' rows."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 2,
    "dtype": "float32",
    "tags": ["index_add", "routing", "residual"],
    # perf: fp32 residual stream of 8 x 4096 tokens at Llama-70B width (1.07 GB), 12.5%
    # capacity (4096 tokens) routed through the block; the out-of-place result moves ~2.4 GB,
    # ~1.2 ms.
    "shapes": {
        "small": {"tokens": 64, "hidden": 32, "capacity": 8},
        "perf": {"tokens": 32768, "hidden": 8192, "capacity": 4096},
    },
    "flops": "2 * capacity * hidden",
    "bytes": "4 * (2 * tokens * hidden + capacity * hidden + capacity) + 8 * capacity",
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "Mixture-of-Depths (Raposo et al. 2024) routed residual update",
}


class Model(nn.Module):
    def forward(self, residual, block_out, router_weight, selected):
        # selected holds distinct token rows (a top-k), so the accumulation is deterministic.
        return residual.index_add(0, selected, block_out * router_weight.unsqueeze(1))


def get_inputs(tokens, hidden, capacity):
    residual = torch.randn(tokens, hidden, dtype=torch.float32)
    block_out = torch.randn(capacity, hidden, dtype=torch.float32)
    router_weight = torch.rand(capacity, dtype=torch.float32)
    selected = torch.randperm(tokens, dtype=torch.int64)[:capacity]
    return [residual, block_out, router_weight, selected]


def get_init_inputs():
    return []
