"""Prefix sum along the sequence of mask-weighted fp32 per-token log-probs, the running log-likelihood of each response prefix with padding masked out (RL rollout scoring)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 2,
    "dtype": "float32",
    "tags": ["scan", "sequence", "mask", "rl"],
    # perf: 4096 rollouts (256 prompts x 16 samples, GRPO) of up to 16384 tokens. Eager: mul then
    # cumsum, (3 + 2) x 268 MB moved -> ~0.45 ms on an H100; 1.1 GB of GPU memory.
    "shapes": {
        "small": {"batch": 8, "seq": 512},
        "perf": {"batch": 4096, "seq": 16384},
    },
    "flops": "2 * batch * seq",
    "bytes": "4 * 3 * batch * seq",
    "source": "Masked cumulative sequence log-prob: torch.cumsum(logprobs * attention_mask, dim=-1)",
}


class Model(nn.Module):
    def forward(self, logprobs, attention_mask):
        return torch.cumsum(logprobs * attention_mask, dim=-1)


def get_inputs(batch, seq):
    # Log-probs of sampled tokens (<= 0), and right-padded 0/1 masks of random response lengths.
    logprobs = torch.rand(batch, seq, dtype=torch.float32).clamp_min_(1e-6).log_()
    lengths = torch.randint(1, seq + 1, (batch, 1))
    mask = (torch.arange(seq)[None, :] < lengths).to(torch.float32)
    return [logprobs, mask]


def get_init_inputs():
    return []
