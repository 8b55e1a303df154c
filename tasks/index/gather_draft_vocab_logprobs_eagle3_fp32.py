"""torch.gather along dim 1 of target-model log-probs at the int64 target-vocab ids of the EAGLE-3 draft vocabulary."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "float32",
    "tags": ["gather", "speculative-decoding", "distillation", "vocab", "memory-bound"],
    # perf: EAGLE-3 draft training on Llama-3.1-8B: 4096 tokens of target log-probs over the
    # 128256 vocab (2.1 GB) gathered at the 32000 draft-vocab ids (524 MB out). One id in four
    # leaves few 32-byte sectors untouched, so ~2.4 GB moves: ~0.8 ms; 2.6 GB resident (4.2 GB
    # peak while get_inputs builds the log-probs).
    "shapes": {
        "small": {"tokens": 8, "vocab": 1000, "draft_vocab": 250},
        "perf": {"tokens": 4096, "vocab": 128256, "draft_vocab": 32000},
    },
    "flops": "0",
    "bytes": "8 * draft_vocab + 2 * 4 * tokens * draft_vocab",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "EAGLE-3 reduced draft vocabulary: target log-probs restricted via the d2t/t2d id map",
}


class Model(nn.Module):
    def forward(self, log_probs, draft_to_target):
        index = draft_to_target.unsqueeze(0).expand(log_probs.shape[0], -1)
        return torch.gather(log_probs, 1, index)


def get_inputs(tokens, vocab, draft_vocab):
    log_probs = torch.randn(tokens, vocab, dtype=torch.float32).mul_(3).log_softmax(dim=-1)
    # Distinct target ids, ascending as the d2t table stores them.
    draft_to_target = torch.randperm(vocab, dtype=torch.int64)[:draft_vocab].sort().values
    return [log_probs, draft_to_target]


def get_init_inputs():
    return []
