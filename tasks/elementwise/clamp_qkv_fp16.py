"""Clamp of the fused q/k/v projection output to [-8, 8] in fp16, DBRX's clip_qkv guard against attention-logit blowups."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "attention"],
    # perf: DBRX qkv width 8192 (48 query + 2 x 8 kv heads of 128), 16 x 4096 tokens.
    "shapes": {
        "small": {"tokens": 64, "qkv": 256},
        "perf": {"tokens": 65536, "qkv": 8192},
    },
    "flops": "2 * tokens * qkv",
    "bytes": "2 * 2 * tokens * qkv",
    "source": "DBRX attention clip_qkv = 8",
}

CLIP = 8.0


class Model(nn.Module):
    def forward(self, qkv):
        return qkv.clamp(min=-CLIP, max=CLIP)


def get_inputs(tokens, qkv):
    # std 4, so about 5% of the entries are clipped.
    return [torch.randn(tokens, qkv, dtype=torch.float16) * 4]


def get_init_inputs():
    return []
