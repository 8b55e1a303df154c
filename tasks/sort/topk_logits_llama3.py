"""Top-k values (largest first) and int64 indices of each row of Llama-3 vocabulary logits (k=50 at perf)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["topk", "selection", "sampling", "distillation", "llama"],
    # perf: top-50 teacher logits of 2048 tokens over the Llama-3 vocabulary (128256), as kept
    # for sparse logit distillation; the same op as a top-k sampler on a large batch.
    "shapes": {
        "small": {"tokens": 8, "vocab": 1000, "k": 10},
        "perf": {"tokens": 2048, "vocab": 128256, "k": 50},
    },
    "flops": "tokens * vocab",
    "bytes": "4 * tokens * vocab + (4 + 8) * tokens * k",
    "source": "torch.topk(logits, k) in top-k sampling (HF TopKLogitsWarper) and top-k distillation",
}


class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, logits):
        values, indices = torch.topk(logits, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_inputs(tokens, vocab):
    # Tie-free by construction, so the indices are unique: plain randn rows of 128k fp32 values
    # hold ~100 exactly tied pairs. Each row holds distinct normal quantiles in a random order:
    # j -> (a*j + b) mod p is injective for the prime p = 2^17 - 1 > vocab and 1 <= a < p
    # (a < 2^13 keeps a*j + b inside int32).
    p = 131071
    a = torch.randint(1, 8192, (tokens, 1), dtype=torch.int32)
    b = torch.randint(0, p, (tokens, 1), dtype=torch.int32)
    rank = torch.arange(vocab, dtype=torch.int32).mul(a).add_(b).remainder_(p)
    u = rank.mul_(2).add_(1).to(torch.float32).div_(p).sub_(1)
    scale = 2.0 ** 0.5 * (1 + torch.rand(tokens, 1, dtype=torch.float32))  # per-row logit scale
    return [u.erfinv_().mul_(scale)]


def get_init_inputs(k):
    return [k]
