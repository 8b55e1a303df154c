"""2D rotary embedding for a ViT patch grid: half of each head's rotary angles follow the patch row, half the column (Qwen2-VL vision encoder)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["rope", "2d-rope", "vision", "attention", "vit"],
    # perf: Qwen2-VL-7B vision tower (16 heads x head_dim 80, patch 14), 4 images of 1344x1008
    # (96 x 72 patch grid = 6912 tokens each). Eager: ~3 GB moved (~1 ms); peak ~1.2 GB.
    "shapes": {
        "small": {"batch": 2, "grid_h": 4, "grid_w": 6, "heads": 2, "head_dim": 16},
        "perf": {"batch": 4, "grid_h": 96, "grid_w": 72, "heads": 16, "head_dim": 80},
    },
    "flops": "2 * 3 * batch * grid_h * grid_w * heads * head_dim + 2 * grid_h * grid_w * head_dim",
    "bytes": "2 * 2 * 4 * batch * grid_h * grid_w * heads * head_dim",
    "source": "HF Qwen2VisionTransformer.rot_pos_emb + apply_rotary_pos_emb_vision (VisionRotaryEmbedding(head_dim // 2))",
}


class Model(nn.Module):
    def __init__(self, grid_h, grid_w, head_dim, theta=10000.0):
        super().__init__()
        dim = head_dim // 2  # rotary dims per axis pair: head_dim // 4 frequencies for rows, same for columns
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.grid_h, self.grid_w = grid_h, grid_w

    def forward(self, q, k):
        # q, k: (batch, grid_h * grid_w, heads, head_dim), patches in row-major order
        rows = torch.arange(self.grid_h, dtype=self.inv_freq.dtype, device=q.device)
        cols = torch.arange(self.grid_w, dtype=self.inv_freq.dtype, device=q.device)
        h_freqs = torch.outer(rows, self.inv_freq)[:, None, :].expand(-1, self.grid_w, -1)
        w_freqs = torch.outer(cols, self.inv_freq)[None, :, :].expand(self.grid_h, -1, -1)
        freqs = torch.cat([h_freqs, w_freqs], dim=-1).flatten(0, 1)  # (tokens, head_dim // 2)
        emb = torch.cat([freqs, freqs], dim=-1)[:, None, :]
        cos, sin = emb.cos(), emb.sin()

        def rotate(x):
            x1, x2 = x.chunk(2, dim=-1)
            return x * cos + torch.cat([-x2, x1], dim=-1) * sin

        return rotate(q), rotate(k)


def get_inputs(batch, grid_h, grid_w, heads, head_dim):
    return [
        torch.randn(batch, grid_h * grid_w, heads, head_dim, dtype=torch.float32),
        torch.randn(batch, grid_h * grid_w, heads, head_dim, dtype=torch.float32),
    ]


def get_init_inputs(grid_h, grid_w, head_dim):
    return [grid_h, grid_w, head_dim]
