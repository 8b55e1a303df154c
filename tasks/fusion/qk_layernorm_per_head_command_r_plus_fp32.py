"""QK-norm with per-head weights: bias-free LayerNorm over head_dim of the query and key projections, as in Cohere Command R+ attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "layernorm", "qk-norm", "gqa", "cohere"],
    # perf: Command R+ 104B (96 query heads, 8 kv heads, head_dim 128), 2 x 2048 tokens.
    # Eager: two CohereLayerNorms (~8 kernels each): ~2.8 GB moved, ~0.9 ms; ~1 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "q_heads": 8, "kv_heads": 2, "head_dim": 32},
        "perf": {"tokens": 4096, "q_heads": 96, "kv_heads": 8, "head_dim": 128},
    },
    "flops": "8 * tokens * (q_heads + kv_heads) * head_dim",
    "bytes": "4 * (2 * tokens * (q_heads + kv_heads) * head_dim + (q_heads + kv_heads) * head_dim)",
    "source": "Hugging Face CohereAttention with use_qk_norm (CohereLayerNorm of shape (heads, head_dim), eps 1e-5)",
}


def cohere_layer_norm(x, weight, eps):
    mean = x.mean(-1, keepdim=True)
    variance = (x - mean).pow(2).mean(-1, keepdim=True)
    return weight * ((x - mean) * torch.rsqrt(variance + eps))


class Model(nn.Module):
    def __init__(self, q_heads, kv_heads, head_dim, eps=1e-5):
        super().__init__()
        # One weight vector per head (no bias).
        self.q_weight = nn.Parameter(torch.empty(q_heads, head_dim, dtype=torch.float32))
        self.k_weight = nn.Parameter(torch.empty(kv_heads, head_dim, dtype=torch.float32))
        nn.init.normal_(self.q_weight, 1.0, 0.3)
        nn.init.normal_(self.k_weight, 1.0, 0.3)
        self.eps = eps

    def forward(self, q, k):
        tokens = q.shape[0]
        q_heads, head_dim = self.q_weight.shape
        kv_heads = self.k_weight.shape[0]
        q = cohere_layer_norm(q.view(tokens, q_heads, head_dim), self.q_weight, self.eps)
        k = cohere_layer_norm(k.view(tokens, kv_heads, head_dim), self.k_weight, self.eps)
        return q.view(tokens, -1), k.view(tokens, -1)


def get_inputs(tokens, q_heads, kv_heads, head_dim):
    # Projection outputs carry a per-channel offset, so the mean subtraction matters.
    return [
        torch.randn(tokens, q_heads * head_dim, dtype=torch.float32) + torch.randn(q_heads * head_dim, dtype=torch.float32),
        torch.randn(tokens, kv_heads * head_dim, dtype=torch.float32) + torch.randn(kv_heads * head_dim, dtype=torch.float32),
    ]


def get_init_inputs(q_heads, kv_heads, head_dim):
    return [q_heads, kv_heads, head_dim]
