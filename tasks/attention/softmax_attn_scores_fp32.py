"""Row softmax over fp32 attention scores, the probability step of eager (unfused) self-attention in Llama-2-7B."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 1,
    "dtype": "float32",
    "tags": ["softmax", "reduction", "attention"],
    # perf: scores of 4 sequences x 32 heads x 2048 x 2048 tokens (Llama-2-7B prefill).
    "shapes": {
        "small": {"batch": 1, "heads": 2, "seq": 64},
        "perf": {"batch": 4, "heads": 32, "seq": 2048},
    },
    "flops": "5 * batch * heads * seq * seq",
    "bytes": "2 * 4 * batch * heads * seq * seq",
    # Probabilities are ~1/seq, so the default atol (1e-4) would accept a bf16 result or even
    # zeros; the absolute tolerance is tightened and the relative one kept at the fp32 default.
    "tolerance": {"atol": 1e-6, "rtol": 1e-4},
    "source": "Hugging Face eager attention: softmax(attn_weights, dim=-1, dtype=torch.float32)",
}


class Model(nn.Module):
    def forward(self, scores):
        return torch.softmax(scores, dim=-1)


def get_inputs(batch, heads, seq):
    return [torch.randn(batch, heads, seq, seq, dtype=torch.float32)]


def get_init_inputs():
    return []
