"""Running maximum and its int64 position along the key axis of attention scores, the m_i statistic of online softmax."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "float32",
    "tags": ["scan", "rows", "argmax", "attention"],
    # perf: 32 heads x 1024 queries x 4096 keys (Llama-2-7B head count, 4k context).
    "shapes": {
        "small": {"heads": 2, "queries": 16, "keys": 128},
        "perf": {"heads": 32, "queries": 1024, "keys": 4096},
    },
    "flops": "heads * queries * keys",
    "bytes": "(4 + 4 + 8) * heads * queries * keys",
    "source": "Online-softmax running max",
}


class Model(nn.Module):
    def forward(self, scores):
        values, indices = torch.cummax(scores, dim=-1)
        return values, indices


def get_inputs(heads, queries, keys):
    return [torch.randn(heads, queries, keys, dtype=torch.float32)]


def get_init_inputs():
    return []
