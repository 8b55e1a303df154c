"""Int32 cumulative sum over tokens of the top-k expert-assignment counts, each token's write offset in its experts' buffers (GShard/Switch MoE dispatch)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "int32",
    "tags": ["scan", "moe", "routing", "integer"],
    # perf: 64 x 4096 tokens routed to 8 of DeepSeek-V3's 256 experts. Eager: one outer-dim scan,
    # 2 x 268 MB moved -> ~0.2-0.4 ms on an H100 (small by nature); 0.54 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 512, "experts": 64},
        "perf": {"tokens": 262144, "experts": 256},
    },
    "flops": "tokens * experts",
    "bytes": "2 * 4 * tokens * experts",
    "source": "GShard/Switch Transformer dispatch: position_in_expert = cumsum(expert_mask, dim=0)",
}


class Model(nn.Module):
    def forward(self, expert_mask):
        # dtype=int32 keeps offsets int32, as grouped-GEMM kernels take them (the default is int64).
        return torch.cumsum(expert_mask, dim=0, dtype=torch.int32)


def get_inputs(tokens, experts):
    # Each token picks about 8 experts; counts are 0/1 int32.
    return [(torch.rand(tokens, experts) < 8 / experts).to(torch.int32)]


def get_init_inputs():
    return []
