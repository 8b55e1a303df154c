"""Scale, causal mask and softmax over raw attention scores (Megatron's scaled_upper_triang_masked_softmax)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["softmax", "attention", "mask"],
    # perf: unfused (eager) attention probabilities of 32 heads x 2048 tokens, 2 sequences
    # (Llama-7B class, head_dim 128).
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 2, "heads": 32, "seq": 2048, "head_dim": 128},
    },
    "flops": "5 * batch * heads * seq * seq",
    "bytes": "2 * 4 * batch * heads * seq * seq",
    # Probabilities are ~1/seq, so the default atol (1e-4) would accept a near-uniform answer.
    "tolerance": {"atol": 1e-6, "rtol": 1e-4},
    "source": "Megatron-LM FusedScaleMaskSoftmax (causal), GPT/Llama eager attention",
}


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, scores):
        seq = scores.shape[-1]
        masked = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        return torch.softmax((scores * self.scale).masked_fill(masked, float("-inf")), dim=-1)


def get_inputs(batch, heads, seq, head_dim):
    # Raw q.k^T of unit-variance q and k has standard deviation sqrt(head_dim).
    return [torch.randn(batch, heads, seq, seq, dtype=torch.float32) * head_dim ** 0.5]


def get_init_inputs(head_dim):
    return [head_dim]
