"""Causal multi-head attention in plain ops (fp32 masked scores and softmax, fp16 P@V), the prefill attention of Llama-2-7B."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "float16",
    "tags": ["attention", "causal", "softmax", "gemm", "llama"],
    # perf: Llama-2-7B prefill, 4 sequences x 2048 tokens, 32 heads of dim 128.
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 4, "heads": 32, "seq": 2048, "head_dim": 128},
    },
    # Causal: only the lower triangle is useful work.
    "flops": "2 * batch * heads * seq * seq * head_dim + 3 * batch * heads * seq * seq",
    "bytes": "2 * 4 * batch * heads * seq * head_dim",
    "source": "Llama-2-7B LlamaAttention (eager path)",
}


class Model(nn.Module):
    def forward(self, q, k, v):
        seq = q.shape[-2]
        s = (q.float() * q.shape[-1] ** -0.5) @ k.float().transpose(-2, -1)
        future = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu_(1)
        s = torch.softmax(s.masked_fill_(future, float("-inf")), dim=-1)
        return s.to(q.dtype) @ v


def get_inputs(batch, heads, seq, head_dim):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.float16) * 2
    k = torch.randn(batch, heads, seq, head_dim, dtype=torch.float16)
    v = torch.randn(batch, heads, seq, head_dim, dtype=torch.float16)
    return [q, k, v]


def get_init_inputs():
    return []
