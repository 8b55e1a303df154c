"""Per-token cross-entropy as log_softmax + NLL over Llama-3 vocabulary logits (the LM-head loss)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["softmax", "loss", "gather", "llama"],
    # perf: Llama-3 vocabulary (128256), 2 x 2048 training tokens.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1000},
        "perf": {"tokens": 4096, "vocab": 128256},
    },
    "flops": "4 * tokens * vocab",
    "bytes": "4 * tokens * vocab + 8 * tokens + 4 * tokens",
    "source": "Llama-3 causal-LM loss: F.cross_entropy(logits.float(), labels, reduction='none')",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        log_probs = torch.log_softmax(logits, dim=-1)
        return torch.nn.functional.nll_loss(log_probs, targets, reduction="none")


def get_inputs(tokens, vocab):
    return [
        torch.randn(tokens, vocab, dtype=torch.float32),
        torch.randint(0, vocab, (tokens,), dtype=torch.int64),
    ]


def get_init_inputs():
    return []
