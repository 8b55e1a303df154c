"""Attention epilogue in bf16: merge heads (transpose + reshape), o_proj, add the residual stream (Llama self-attention output)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "residual", "attention", "layout", "llama"],
    # perf: Llama-3-8B (32 heads x 128 = hidden 4096), 4 x 4096 prefill tokens.
    # Eager: 550 GFLOP GEMM with the residual in its epilogue (~1 ms) + ~0.3 GB moved by the head
    # merge; peak ~0.6 GB.
    "shapes": {
        "small": {"batch": 1, "heads": 4, "seq": 16, "head_dim": 16},
        "perf": {"batch": 4, "heads": 32, "seq": 4096, "head_dim": 128},
    },
    "flops": "2 * batch * seq * (heads * head_dim) ** 2 + batch * seq * heads * head_dim",
    "bytes": "2 * (3 * batch * seq * heads * head_dim + (heads * head_dim) ** 2)",
    "source": "HF LlamaAttention: transpose(1, 2).reshape -> o_proj, then residual + hidden_states in the decoder layer",
}


class Model(nn.Module):
    def __init__(self, heads, head_dim):
        super().__init__()
        hidden = heads * head_dim
        self.o_proj = nn.Linear(hidden, hidden, bias=False, dtype=torch.bfloat16)
        nn.init.normal_(self.o_proj.weight, 0.0, hidden ** -0.5)  # unit-variance outputs

    def forward(self, attn_output, residual):
        batch, heads, seq, head_dim = attn_output.shape
        merged = attn_output.transpose(1, 2).reshape(batch * seq, heads * head_dim)
        # addmm adds the residual in the GEMM's fp32 epilogue and rounds to bf16 once (HF's separate
        # bf16 add rounds twice, up to ~2 bf16 ulps off after cancellation).
        out = torch.addmm(residual.flatten(0, 1), merged, self.o_proj.weight.t())
        return out.view_as(residual)


def get_inputs(batch, heads, seq, head_dim):
    return [
        torch.randn(batch, heads, seq, head_dim, dtype=torch.bfloat16),
        torch.randn(batch, seq, heads * head_dim, dtype=torch.bfloat16),
    ]


def get_init_inputs(heads, head_dim):
    return [heads, head_dim]
