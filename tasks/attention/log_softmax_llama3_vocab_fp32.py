"""Log-softmax of fp32 LM-head logits over the Llama-3 vocabulary, the per-token log-probabilities used in RLHF (PPO/GRPO) and scoring."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 1,
    "dtype": "float32",
    "tags": ["log_softmax", "reduction", "vocab", "llama"],
    # perf: 4096 tokens (e.g. 8 rollouts x 512 tokens) over Llama-3's 128256-token vocabulary.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1000},
        "perf": {"tokens": 4096, "vocab": 128256},
    },
    "flops": "4 * tokens * vocab",
    "bytes": "2 * 4 * tokens * vocab",
    "source": "Llama-3-8B policy log-probs (TRL / OpenRLHF)",
}


class Model(nn.Module):
    def forward(self, logits):
        return torch.log_softmax(logits, dim=-1)


def get_inputs(tokens, vocab):
    return [torch.randn(tokens, vocab, dtype=torch.float32)]


def get_init_inputs():
    return []
