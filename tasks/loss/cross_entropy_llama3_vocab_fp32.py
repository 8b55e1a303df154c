"""Per-token cross-entropy of fp32 LM-head logits over the Llama-3 vocabulary against int64 next-token targets (pretraining/SFT loss before masking and averaging)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 1,
    "dtype": "float32",
    "tags": ["cross_entropy", "log_softmax", "gather", "vocab", "llama"],
    # perf: 2 sequences x 2048 tokens over Llama-3's 128256-token vocabulary.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1000},
        "perf": {"tokens": 4096, "vocab": 128256},
    },
    "flops": "4 * tokens * vocab",
    "bytes": "4 * tokens * vocab + 8 * tokens + 4 * tokens",
    "source": "Llama-3-8B causal-LM loss (reduction='none', as used with loss masks)",
}


class Model(nn.Module):
    def forward(self, logits, targets):
        return nn.functional.cross_entropy(logits, targets, reduction="none")


def get_inputs(tokens, vocab):
    return [
        torch.randn(tokens, vocab, dtype=torch.float32),
        torch.randint(0, vocab, (tokens,), dtype=torch.int64),
    ]


def get_init_inputs():
    return []
