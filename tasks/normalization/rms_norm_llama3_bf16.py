"""RMSNorm as in Hugging Face LlamaRMSNorm (fp32 statistics, bf16 weight), applied before every Llama-3 attention and MLP."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["rmsnorm", "reduction", "llama"],
    # perf: 8 sequences x 2048 tokens of Llama-3-70B's 8192-wide hidden state.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 8192},
    },
    "flops": "4 * tokens * hidden",
    "bytes": "2 * (2 * tokens * hidden + hidden)",
    "source": "Llama-3-70B input_layernorm / post_attention_layernorm",
}


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.bfloat16))
        nn.init.normal_(self.weight, 1.0, 0.5)
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden):
    return [hidden]
