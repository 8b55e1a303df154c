"""Sampling probabilities from Gemma-2 final logits: soft-capping 30 * tanh(x / 30), per-request temperature, softmax over the vocabulary."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["softcap", "tanh", "softmax", "sampling", "logits", "gemma"],
    # perf: a 256-sequence decode batch (vLLM's default max_num_seqs) over Gemma-2's 256000
    # vocabulary. Eager: div, tanh, mul, div, softmax: ~2.9 GB moved, ~1 ms; ~1.1 GB.
    "shapes": {
        "small": {"rows": 16, "vocab": 1024},
        "perf": {"rows": 256, "vocab": 256000},
    },
    "flops": "14 * rows * vocab",
    "bytes": "4 * (2 * rows * vocab + rows)",
    # atol 1e-8: most probabilities are far below 1e-4, so the default atol would let zeros pass.
    "tolerance": {"atol": 1e-8, "rtol": 1e-4},
    "source": "Gemma-2 final_logit_softcapping (30.0) followed by vLLM's sampler: logits / temperature, softmax in fp32",
}

CAP = 30.0


class Model(nn.Module):
    def forward(self, logits, temperatures):
        logits = torch.tanh(logits / CAP) * CAP
        logits = logits / temperatures.unsqueeze(1)
        return torch.softmax(logits, dim=-1)


def get_inputs(rows, vocab):
    return [
        torch.randn(rows, vocab, dtype=torch.float32) * 8,  # wide enough that the cap bends the top logits
        torch.rand(rows, dtype=torch.float32) + 0.5,  # per-request temperatures in [0.5, 1.5)
    ]


def get_init_inputs():
    return []
