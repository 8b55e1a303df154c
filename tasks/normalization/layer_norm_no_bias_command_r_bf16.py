"""LayerNorm with weight and no bias (fp32 statistics, bf16 in/out), the input norm of every Cohere Command-R decoder layer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "normalization",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["layernorm", "no_bias", "reduction", "cohere"],
    # perf: 8 sequences x 2048 tokens of Command-R (35B)'s 8192-wide hidden state (268 MB in).
    # The eager fp32 path runs ~10 kernels over 537 MB fp32 temporaries (~7 GB moved):
    # ~2.5 ms on an H100, ~2.5 GB of memory.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 8192},
    },
    "flops": "7 * tokens * hidden",
    "bytes": "2 * (2 * tokens * hidden + hidden)",
    "source": "HF CohereLayerNorm (Command-R input_layernorm, eps 1e-5, bias=False)",
}


class Model(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.bfloat16))
        nn.init.normal_(self.weight, 1.0, 0.5)
        self.eps = eps

    def forward(self, x):
        h = x.float()
        mean = h.mean(-1, keepdim=True)
        var = (h - mean).pow(2).mean(-1, keepdim=True)
        h = (h - mean) * torch.rsqrt(var + self.eps)
        return (self.weight.float() * h).to(x.dtype)


def get_inputs(tokens, hidden):
    # Per-token offsets and scales, so that centring matters (a plain RMSNorm would not pass).
    offset = torch.randn(tokens, 1, dtype=torch.float32)
    scale = torch.rand(tokens, 1, dtype=torch.float32) * 2 + 0.5
    return [(torch.randn(tokens, hidden, dtype=torch.float32) * scale + offset).to(torch.bfloat16)]


def get_init_inputs(hidden):
    return [hidden]
