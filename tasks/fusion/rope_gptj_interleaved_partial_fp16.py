"""GPT-J rotary embedding: interleaved (rotate-every-two) RoPE on the first rotary_dim channels of each q/k head, the rest passed through."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["rope", "attention", "gather", "interleaved", "gptj"],
    # perf: GPT-J-6B (16 heads x head_dim 256, rotary_dim 64, max 2048 positions), 8 x 2048 tokens
    # continuing at per-sequence offsets. Eager: ~4 GB moved by fp32 temporaries (~1.3 ms); peak ~1.2 GB.
    "shapes": {
        "small": {"batch": 2, "seq": 16, "heads": 4, "head_dim": 32, "rotary_dim": 16, "max_pos": 64},
        "perf": {"batch": 8, "seq": 2048, "heads": 16, "head_dim": 256, "rotary_dim": 64, "max_pos": 2048},
    },
    "flops": "2 * 3 * batch * seq * heads * rotary_dim",
    "bytes": "2 * 2 * 2 * batch * seq * heads * head_dim + 8 * batch * seq + 4 * batch * seq * rotary_dim",
    "source": "HF GPTJAttention: embed_positions[position_ids], apply_rotary_pos_emb with rotate_every_two",
}


class Model(nn.Module):
    def __init__(self, rotary_dim, max_pos):
        super().__init__()
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
        angles = torch.outer(torch.arange(max_pos, dtype=torch.float64), inv_freq)
        self.register_buffer("sin_cos", torch.cat([angles.sin(), angles.cos()], dim=-1).float())
        self.rotary_dim = rotary_dim

    def _rotate(self, x, sin, cos):
        rot, rest = x[..., : self.rotary_dim].float(), x[..., self.rotary_dim :]
        every_two = torch.stack((-rot[..., 1::2], rot[..., ::2]), dim=-1).flatten(-2)
        return torch.cat([rot * cos + every_two * sin, rest.float()], dim=-1).to(x.dtype)

    def forward(self, position_ids, q, k):
        # q, k: (batch, seq, heads, head_dim); sin/cos repeated per channel pair (x0, x1) -> (x0, x0, x1, x1...)
        sin, cos = self.sin_cos[position_ids].chunk(2, dim=-1)
        sin = sin.repeat_interleave(2, dim=-1).unsqueeze(2)
        cos = cos.repeat_interleave(2, dim=-1).unsqueeze(2)
        return self._rotate(q, sin, cos), self._rotate(k, sin, cos)


def get_inputs(batch, seq, heads, head_dim, max_pos):
    offsets = torch.randint(0, max_pos - seq + 1, (batch, 1), dtype=torch.int64)
    return [
        offsets + torch.arange(seq, dtype=torch.int64),
        torch.randn(batch, seq, heads, head_dim, dtype=torch.float16),
        torch.randn(batch, seq, heads, head_dim, dtype=torch.float16),
    ]


def get_init_inputs(rotary_dim, max_pos):
    return [rotary_dim, max_pos]
