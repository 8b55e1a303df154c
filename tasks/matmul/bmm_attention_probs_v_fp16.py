"""Batched fp16 GEMM P @ V of softmax probabilities and values over (batch x heads): the output product of unfused attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 1,
    "dtype": "float16",
    "tags": ["bmm", "batched", "attention"],
    # perf: batch 8 x 32 heads, 2048 tokens, head_dim 128 (Llama-2-7B eager attention); reading
    # the 2.1 GB probability matrix dominates (137 GFLOP): ~0.8 ms, 2.3 GB of memory.
    "shapes": {
        "small": {"batch_heads": 4, "seq": 64, "head_dim": 16},
        "perf": {"batch_heads": 256, "seq": 2048, "head_dim": 128},
    },
    "flops": "2 * batch_heads * seq * seq * head_dim",
    "bytes": "2 * (batch_heads * seq * seq + 2 * batch_heads * seq * head_dim)",
    # Rows of P are softmax probabilities, so outputs are averages of values with magnitude
    # ~0.05-0.5; atol is tightened from 1e-2 to 1e-3 so that an all-zero or coarse result fails.
    "tolerance": {"atol": 1e-3, "rtol": 1e-2},
    "source": "Llama-2-7B eager attention (HF LlamaAttention, attn_weights @ value_states)",
}


class Model(nn.Module):
    def forward(self, probs, v):
        return torch.bmm(probs, v)


def get_inputs(batch_heads, seq, head_dim):
    probs = torch.softmax(torch.randn(batch_heads, seq, seq, dtype=torch.float16).mul_(2.0), dim=-1)
    return [probs, torch.randn(batch_heads, seq, head_dim, dtype=torch.float16)]


def get_init_inputs():
    return []
