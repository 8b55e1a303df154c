"""Bidirectional scaled-dot-product attention in plain ops (fp32 scores and softmax, bf16 P@V), the joint text+image attention of Flux.1."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["attention", "softmax", "gemm", "diffusion"],
    # perf: Flux.1 at 1024x1024: 4096 image + 512 text tokens, 24 heads of dim 128, one image.
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 1, "heads": 24, "seq": 4608, "head_dim": 128},
    },
    "flops": "4 * batch * heads * seq * seq * head_dim + 5 * batch * heads * seq * seq",
    "bytes": "2 * 4 * batch * heads * seq * head_dim",
    "source": "Flux.1 double/single-stream block attention",
}


class Model(nn.Module):
    def forward(self, q, k, v):
        s = (q.float() * q.shape[-1] ** -0.5) @ k.float().transpose(-2, -1)
        s = torch.softmax(s, dim=-1)
        return s.to(q.dtype) @ v


def get_inputs(batch, heads, seq, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16) * 2
    k = torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16)
    v = torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
