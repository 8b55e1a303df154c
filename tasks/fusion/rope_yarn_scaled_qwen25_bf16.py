"""YaRN-extended RoPE: gather the cos/sin of YaRN-interpolated frequencies at token positions, scale them by the YaRN attention factor, rotate q and k."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["rope", "yarn", "long-context", "attention", "gather", "gqa"],
    # perf: Qwen2.5-7B with YaRN factor 4 (original 32768 -> 131072 positions; 28 q heads, 4 kv
    # heads, head_dim 128), a 32768-token continuous-batching step at positions < 131072.
    # Eager: ~3 GB moved by fp32 temporaries (~1 ms); peak ~1 GB including the 67 MB cos/sin cache.
    "shapes": {
        "small": {"tokens": 32, "heads": 4, "kv_heads": 2, "head_dim": 32, "max_pos": 256, "orig_max_pos": 64},
        "perf": {"tokens": 32768, "heads": 28, "kv_heads": 4, "head_dim": 128, "max_pos": 131072, "orig_max_pos": 32768},
    },
    "flops": "3 * tokens * (heads + kv_heads) * head_dim + 2 * tokens * head_dim",
    "bytes": "2 * 2 * tokens * (heads + kv_heads) * head_dim + 4 * tokens * head_dim + 8 * tokens",
    # rtol 2e-2: a kernel that orders the fp32 math differently lands one bf16 ulp away (0.8%
    # relative) where rounding is close, which exceeds half the default bound for outputs above 2.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "HF _compute_yarn_parameters (beta_fast 32, beta_slow 1, mscale 0.1 ln(factor) + 1) / vLLM YaRNScalingRotaryEmbedding",
}


def yarn_inv_freq(head_dim, theta, factor, orig_max_pos, beta_fast=32.0, beta_slow=1.0):
    def correction_dim(rotations):
        return head_dim * math.log(orig_max_pos / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), head_dim - 1)
    pos_freqs = theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / max(high - low, 1e-3)).clamp(0, 1)
    extrapolate = 1 - ramp  # 1 for high-frequency dims (kept), 0 for low-frequency dims (interpolated)
    return (1 / (factor * pos_freqs)) * (1 - extrapolate) + (1 / pos_freqs) * extrapolate


class Model(nn.Module):
    def __init__(self, head_dim, max_pos, orig_max_pos, theta=1000000.0):
        super().__init__()
        factor = max_pos / orig_max_pos
        inv_freq = yarn_inv_freq(head_dim, theta, factor, orig_max_pos)
        angles = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
        self.register_buffer("cos_cache", angles.cos().float())
        self.register_buffer("sin_cache", angles.sin().float())
        self.mscale = 0.1 * math.log(factor) + 1.0

    @staticmethod
    def _rotate(x, cos, sin):
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)

    def forward(self, positions, q, k):
        # q: (tokens, heads, head_dim), k: (tokens, kv_heads, head_dim)
        cos = (self.cos_cache[positions] * self.mscale).unsqueeze(1)
        sin = (self.sin_cache[positions] * self.mscale).unsqueeze(1)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)


def get_inputs(tokens, heads, kv_heads, head_dim, max_pos):
    return [
        torch.randint(0, max_pos, (tokens,), dtype=torch.int64),
        torch.randn(tokens, heads, head_dim, dtype=torch.bfloat16),
        torch.randn(tokens, kv_heads, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(head_dim, max_pos, orig_max_pos):
    return [head_dim, max_pos, orig_max_pos]
