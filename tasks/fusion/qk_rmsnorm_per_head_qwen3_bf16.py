"""QK-norm: per-head RMSNorm over head_dim of the query and key slices of a fused QKV projection (GQA), as in Qwen3 attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["norm", "rmsnorm", "qk-norm", "gqa", "qwen"],
    # perf: Qwen3-32B (64 query heads, 8 kv heads, head_dim 128; qkv 10240 wide), 4 x 2048 tokens.
    # Eager: two Qwen3RMSNorms on strided views: ~2.8 GB moved, ~0.9 ms; ~1 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "q_heads": 8, "kv_heads": 2, "head_dim": 32},
        "perf": {"tokens": 8192, "q_heads": 64, "kv_heads": 8, "head_dim": 128},
    },
    "flops": "6 * tokens * (q_heads + kv_heads) * head_dim",
    "bytes": "2 * (2 * tokens * (q_heads + kv_heads) * head_dim + 2 * head_dim)",
    # rtol 3e-2: the reference rounds the normalized value to bf16 before the weight multiply
    # and again after it; a kernel that applies the weight in fp32 rounds once and can be up to
    # 2 bf16 ulps (~1.2%) away.
    "tolerance": {"atol": 1e-2, "rtol": 3e-2},
    "source": "Hugging Face Qwen3Attention q_norm / k_norm (Qwen3RMSNorm over head_dim, eps 1e-6), vLLM fused qkv_proj layout",
}


class Model(nn.Module):
    def __init__(self, q_heads, kv_heads, head_dim, eps=1e-6):
        super().__init__()
        self.q_weight = nn.Parameter(torch.empty(head_dim, dtype=torch.bfloat16))
        self.k_weight = nn.Parameter(torch.empty(head_dim, dtype=torch.bfloat16))
        nn.init.normal_(self.q_weight, 1.0, 0.3)
        nn.init.normal_(self.k_weight, 1.0, 0.3)
        self.q_heads, self.kv_heads, self.head_dim = q_heads, kv_heads, head_dim
        self.eps = eps

    def rms_norm(self, x, weight):
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return weight * h.to(x.dtype)

    def forward(self, qkv):
        tokens, q_heads, kv_heads, d = qkv.shape[0], self.q_heads, self.kv_heads, self.head_dim
        q = qkv[:, : q_heads * d].view(tokens, q_heads, d)
        k = qkv[:, q_heads * d : (q_heads + kv_heads) * d].view(tokens, kv_heads, d)
        q = self.rms_norm(q, self.q_weight).view(tokens, q_heads * d)
        k = self.rms_norm(k, self.k_weight).view(tokens, kv_heads * d)
        return q, k


def get_inputs(tokens, q_heads, kv_heads, head_dim):
    # The value slice is part of the fused projection's output but is not read here.
    qkv = torch.randn(tokens, (q_heads + 2 * kv_heads) * head_dim, dtype=torch.bfloat16)
    return [qkv]


def get_init_inputs(q_heads, kv_heads, head_dim):
    return [q_heads, kv_heads, head_dim]
