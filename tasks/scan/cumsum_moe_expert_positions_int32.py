"""Int32 cumulative sum over tokens of the top-k expert-assignment counts, each token's write offset in its experts' buffers (GShard/Switch MoE dispatch)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "int32",
    "tags": ["scan", "moe", "routing", "integer"],
    # perf: a 4 x 4096-token micro-batch routed to 8 of DeepSeek-V3's 256 experts: 2 x 16.8 MB
    # moved. Eager PyTorch's int32 scan along the outer dim is slow (64 x 4096 tokens measured
    # 98 ms on an H100, over the window): ~6 ms here, where a good kernel needs ~0.02 ms.
    "shapes": {
        "small": {"tokens": 512, "experts": 64},
        "perf": {"tokens": 16384, "experts": 256},
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
