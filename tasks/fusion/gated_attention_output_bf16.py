"""Attention output gated by sigmoid(x W_gate) in bf16: the head-wise output gate of gated attention (Qwen3-Next)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "sigmoid", "gating", "attention"],
    # perf: Qwen3-Next-80B-A3B widths (hidden 2048, 16 heads x head_dim 256 = 4096), 8 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "attn_dim": 128},
        "perf": {"tokens": 16384, "hidden": 2048, "attn_dim": 4096},
    },
    "flops": "2 * tokens * hidden * attn_dim + 5 * tokens * attn_dim",
    "bytes": "2 * (tokens * hidden + hidden * attn_dim + 2 * tokens * attn_dim)",
    "source": "Gated attention (Qiu et al. 2025) / Qwen3-Next: attn_output * sigmoid(gate)",
}


class Model(nn.Module):
    def __init__(self, hidden, attn_dim):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, attn_dim, bias=False, dtype=torch.bfloat16)
        nn.init.normal_(self.gate_proj.weight, 0.0, hidden ** -0.5)  # unit-variance outputs

    def forward(self, hidden_states, attn_output):
        return attn_output * torch.sigmoid(self.gate_proj(hidden_states))


def get_inputs(tokens, hidden, attn_dim):
    return [
        torch.randn(tokens, hidden, dtype=torch.bfloat16),
        torch.randn(tokens, attn_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(hidden, attn_dim):
    return [hidden, attn_dim]
