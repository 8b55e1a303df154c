"""Multimodal RoPE (M-RoPE): cos/sin from separate temporal/height/width position ids, interleaved by frequency section, applied to q and k (Qwen2-VL)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["rope", "mrope", "multimodal", "attention", "gqa"],
    # perf: Qwen2-VL-7B language model (28 q heads, 4 kv heads, head_dim 128, mrope_section
    # [16, 24, 24], theta 1e6), 4 sequences x 4096 mixed video/image/text tokens.
    # Eager: ~4 GB moved by fp32 temporaries (~1.3 ms); peak ~1.2 GB.
    "shapes": {
        "small": {"batch": 2, "heads": 4, "kv_heads": 2, "seq": 16, "head_dim": 32, "max_pos": 64},
        "perf": {"batch": 4, "heads": 28, "kv_heads": 4, "seq": 4096, "head_dim": 128, "max_pos": 4096},
    },
    "flops": "3 * batch * (heads + kv_heads) * seq * head_dim + 6 * batch * seq * head_dim",
    "bytes": "2 * 2 * batch * (heads + kv_heads) * seq * head_dim + 8 * 3 * batch * seq",
    # Numerics contract: angles in fp32, rotation in fp32, one rounding to bf16 (HF rounds cos/sin
    # and each product to bf16 as well, which is up to ~2 bf16 ulps further off).
    # rtol 2e-2: a kernel that orders the fp32 math differently lands one bf16 ulp away (0.8%
    # relative) where rounding is close, which exceeds half the default bound for outputs above 2.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "HF Qwen2VLRotaryEmbedding + apply_multimodal_rotary_pos_emb (mrope_section [16, 24, 24])",
}


class Model(nn.Module):
    def __init__(self, head_dim, theta=1000000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        # [16, 24, 24] of the 64 frequencies for head_dim 128: temporal, height, width.
        self.sections = [head_dim // 8, 3 * head_dim // 16, 3 * head_dim // 16] * 2

    def forward(self, position_ids, q, k):
        # position_ids: (3, batch, seq); q: (batch, heads, seq, head_dim); k: (batch, kv_heads, seq, head_dim)
        freqs = position_ids.to(self.inv_freq.dtype)[..., None] * self.inv_freq  # (3, batch, seq, head_dim // 2)
        emb = torch.cat([freqs, freqs], dim=-1)
        # Section i of the head_dim takes its angle from stream i % 3 (t, h, w, t, h, w).
        emb = torch.cat([part[i % 3] for i, part in enumerate(emb.split(self.sections, dim=-1))], dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)

        def rotate(x):
            xf = x.float()
            x1, x2 = xf.chunk(2, dim=-1)
            return (xf * cos + torch.cat([-x2, x1], dim=-1) * sin).to(x.dtype)

        return rotate(q), rotate(k)


def get_inputs(batch, heads, kv_heads, seq, head_dim, max_pos):
    # Independent (t, h, w) ids, as interleaved video frames, image grids and text produce.
    return [
        torch.randint(0, max_pos, (3, batch, seq), dtype=torch.int64),
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(head_dim):
    return [head_dim]
