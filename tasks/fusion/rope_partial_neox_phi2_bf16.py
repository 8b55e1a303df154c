"""Partial rotary embedding (Phi-2 / StableLM): cos/sin computed from position ids, neox-style RoPE on the first 40% of each head, rest passed through."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["rope", "attention", "partial-rotary", "phi"],
    # perf: Phi-2 (32 heads x head_dim 80, partial_rotary_factor 0.4 -> 32 rotary dims), 16 x 2048
    # prefill tokens. Eager: ~4 GB moved by fp32 temporaries (~1.4 ms); peak ~1.2 GB.
    "shapes": {
        "small": {"batch": 2, "heads": 4, "seq": 16, "head_dim": 40, "rotary_dim": 16},
        "perf": {"batch": 16, "heads": 32, "seq": 2048, "head_dim": 80, "rotary_dim": 32},
    },
    "flops": "2 * 3 * batch * heads * seq * rotary_dim + 4 * batch * seq * rotary_dim",
    "bytes": "2 * 2 * 2 * batch * heads * seq * head_dim + 8 * batch * seq",
    # Numerics contract: angles = position * inv_freq in fp32, rotation in fp32, one rounding to
    # bf16 (HF rounds cos/sin and the products to bf16; that is up to ~2 bf16 ulps further off).
    # rtol 2e-2: a kernel that orders the fp32 math differently lands one bf16 ulp away (0.8%
    # relative) where rounding is close, which exceeds half the default bound for outputs above 2.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "HF PhiAttention / StableLmAttention: rotary on q[..., :rotary_ndims], cat with the pass-through part",
}


class Model(nn.Module):
    def __init__(self, rotary_dim, theta=10000.0):
        super().__init__()
        exponents = torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim
        self.register_buffer("inv_freq", 1.0 / theta**exponents)
        self.rotary_dim = rotary_dim

    def _rotate(self, x, cos, sin):
        rot, rest = x[..., : self.rotary_dim].float(), x[..., self.rotary_dim :]
        x1, x2 = rot.chunk(2, dim=-1)
        rot = rot * cos + torch.cat((-x2, x1), dim=-1) * sin
        return torch.cat((rot.to(x.dtype), rest), dim=-1)

    def forward(self, position_ids, q, k):
        # q, k: (batch, heads, seq, head_dim); position_ids: (batch, seq)
        freqs = position_ids.float()[..., None] * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        cos, sin = emb.cos(), emb.sin()
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)


def get_inputs(batch, heads, seq, head_dim):
    # Chunked prefill: each sequence's chunk starts at its own position.
    offsets = torch.randint(0, seq, (batch, 1), dtype=torch.int64)
    return [
        offsets + torch.arange(seq, dtype=torch.int64),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(rotary_dim):
    return [rotary_dim]
