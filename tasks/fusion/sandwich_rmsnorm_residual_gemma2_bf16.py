"""Gemma-2 sandwich norm: post-attention RMSNorm(1 + w), residual add, then pre-feedforward RMSNorm(1 + w), in bf16 with fp32 statistics."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["norm", "rmsnorm", "residual", "gemma"],
    # perf: Gemma-2-27B hidden 4608, one 8192-token sequence (its full context).
    # Eager: two fp32 RMSNorms (~7 kernels each) and an add: ~3.5 GB moved, ~1.2 ms; ~1 GB.
    "shapes": {
        "small": {"tokens": 64, "hidden": 192},
        "perf": {"tokens": 8192, "hidden": 4608},
    },
    "flops": "14 * tokens * hidden",
    "bytes": "2 * (4 * tokens * hidden + 2 * hidden)",
    # Loosened: the reference rounds the first norm's output (|values| up to ~8) to bf16 before
    # the residual add; a fused kernel that adds in fp32 differs by up to half its ulp (0.016)
    # where the sum cancels to ~0 (atol 3e-2), and by ~2 bf16 ulps elsewhere (rtol 2e-2).
    "tolerance": {"atol": 3e-2, "rtol": 2e-2},
    "source": "Hugging Face Gemma2DecoderLayer: post_attention_layernorm, residual add, pre_feedforward_layernorm (eps 1e-6)",
}


def gemma_rms_norm(x, weight, eps):
    out = x.float()
    out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + eps)
    return (out * (1.0 + weight.float())).type_as(x)


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        # Gemma stores norm weights as offsets from 1.
        self.post_attention_weight = nn.Parameter(torch.empty(hidden, dtype=torch.bfloat16))
        self.pre_feedforward_weight = nn.Parameter(torch.empty(hidden, dtype=torch.bfloat16))
        nn.init.normal_(self.post_attention_weight, 0.0, 0.2)
        nn.init.normal_(self.pre_feedforward_weight, 0.0, 0.2)
        self.eps = eps

    def forward(self, attn_out, residual):
        residual = residual + gemma_rms_norm(attn_out, self.post_attention_weight, self.eps)
        return gemma_rms_norm(residual, self.pre_feedforward_weight, self.eps), residual


def get_inputs(tokens, hidden):
    return [
        torch.randn(tokens, hidden, dtype=torch.bfloat16),
        torch.randn(tokens, hidden, dtype=torch.bfloat16) * 2,
    ]


def get_init_inputs(hidden):
    return [hidden]
