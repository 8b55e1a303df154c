"""Batched matrix-vector chain of one Gated DeltaNet decode step: u = S k, S' = a S + b (v - a u) k^T, o = S' q, per head."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemv", "batched", "rank-1-update", "linear-attention", "decode", "memory-bound"],
    # perf: decode batch 128 x 32 heads with 128 x 128 fp32 states (Qwen3-Next linear-attention
    # layers); the 268 MB state is read/written ~8 times eagerly: ~2.1 GB, ~1 ms on an H100
    # (batch 64 measured 0.49 ms, just under the window), 1.1 GB.
    "shapes": {
        "small": {"batch": 2, "heads": 4, "dk": 32, "dv": 32},
        "perf": {"batch": 128, "heads": 32, "dk": 128, "dv": 128},
    },
    "flops": "7 * batch * heads * dk * dv",
    "bytes": "4 * batch * heads * (2 * dk * dv + 2 * dk + 2 * dv + 2)",
    # States and unit-norm q, k keep every output O(1): fp32 reorderings of the 128-term dot
    # products stay near 1e-6; bf16 fails.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "Gated DeltaNet (Yang et al. 2024) recurrent decode, as in Qwen3-Next / fla fused_recurrent_gated_delta_rule",
}


class Model(nn.Module):
    def forward(self, state, q, k, v, alpha, beta):
        # state: [batch, heads, dv, dk] maps keys to values; alpha (decay) and beta (write strength) in (0, 1).
        alpha = alpha[..., None]
        u = (state @ k.unsqueeze(-1)).squeeze(-1)
        delta = beta[..., None] * (v - alpha * u)
        state = alpha.unsqueeze(-1) * state + delta.unsqueeze(-1) * k.unsqueeze(-2)
        out = (state @ q.unsqueeze(-1)).squeeze(-1)
        return out, state


def get_inputs(batch, heads, dk, dv):
    state = torch.randn(batch, heads, dv, dk, dtype=torch.float32)
    q = torch.nn.functional.normalize(torch.randn(batch, heads, dk, dtype=torch.float32), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(batch, heads, dk, dtype=torch.float32), dim=-1)
    v = torch.randn(batch, heads, dv, dtype=torch.float32)
    alpha = torch.rand(batch, heads, dtype=torch.float32) * 0.5 + 0.5
    beta = torch.rand(batch, heads, dtype=torch.float32) * 0.9 + 0.1
    return [state, q, k, v, alpha, beta]


def get_init_inputs():
    return []
