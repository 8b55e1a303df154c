"""A pre-norm ViT encoder block in bf16: LayerNorm, multi-head self-attention (plain ops), residual, LayerNorm, GELU MLP, residual (ViT-L/16)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "bfloat16",
    "tags": ["transformer", "attention", "layernorm", "mlp", "gelu", "vit"],
    # perf: one ViT-L/16 block (width 1024, 16 heads x 64, MLP 4096) on 128 images of 224x224
    # (197 tokens each): ~650 GFLOP of GEMMs (~1.2 ms) plus LayerNorm/GELU/softmax passes
    # (~3 GB moved, ~1 ms): ~2.5 ms on an H100, ~2 GB of memory.
    "shapes": {
        "small": {"batch": 2, "seq": 17, "dim": 64, "heads": 4, "mlp": 256},
        "perf": {"batch": 128, "seq": 197, "dim": 1024, "heads": 16, "mlp": 4096},
    },
    "flops": "2 * batch * seq * dim * (4 * dim + 2 * mlp) + 4 * batch * seq * seq * dim",
    "bytes": "2 * (2 * batch * seq * dim + 4 * dim * dim + 2 * dim * mlp + 9 * dim + mlp)",
    # About a dozen bf16 roundings (norms, projections, probabilities, GELU, two residual adds)
    # and reductions of length up to 4096. Where the O(1-3) residual terms cancel, the output is
    # small but carries their bf16 rounding (0.0156 per ulp): an implementation with fp32
    # intermediates differs by up to 0.031 absolute, hence atol 6e-2; rtol 3e-2 elsewhere.
    "tolerance": {"atol": 6e-2, "rtol": 3e-2},
    "source": "timm VisionTransformer Block (vit_large_patch16_224, non-fused attention path)",
}


class Model(nn.Module):
    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads

        def linear(d_in, d_out):
            layer = nn.Linear(d_in, d_out, dtype=torch.bfloat16)
            nn.init.normal_(layer.weight, 0.0, d_in ** -0.5)  # unit-variance outputs
            nn.init.normal_(layer.bias, 0.0, 0.1)
            return layer

        def norm():
            layer = nn.LayerNorm(dim, eps=1e-6, dtype=torch.bfloat16)
            nn.init.normal_(layer.weight, 1.0, 0.1)
            nn.init.normal_(layer.bias, 0.0, 0.1)
            return layer

        self.norm1, self.qkv, self.proj = norm(), linear(dim, 3 * dim), linear(dim, dim)
        self.norm2, self.fc1, self.fc2 = norm(), linear(dim, mlp), linear(mlp, dim)
        with torch.no_grad():
            self.qkv.weight[:dim] *= 2  # query scores with std ~2, as in trained models

    def attention(self, x):
        batch, seq, dim = x.shape
        qkv = self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        s = (q * (dim // self.heads) ** -0.5) @ k.transpose(-2, -1)
        p = torch.softmax(s, dim=-1, dtype=torch.float32).to(x.dtype)
        return self.proj((p @ v).transpose(1, 2).reshape(batch, seq, dim))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


def get_inputs(batch, seq, dim):
    return [torch.randn(batch, seq, dim, dtype=torch.bfloat16)]


def get_init_inputs(dim, heads, mlp):
    return [dim, heads, mlp]
