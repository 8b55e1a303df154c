"""DeepNorm residual: LayerNorm(alpha * x + f(x)) with alpha = sqrt(2 * layers), the post-LN sublayer update of GLM-130B in fp16."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["norm", "layernorm", "residual", "scaling", "glm"],
    # perf: GLM-130B hidden 12288, 70 layers (alpha = sqrt(140)), 8 x 2048 tokens.
    # Eager: scale, add, LayerNorm: ~2.8 GB moved, ~0.9 ms; ~2 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 12288},
    },
    "flops": "10 * tokens * hidden",
    "bytes": "2 * (3 * tokens * hidden + 2 * hidden)",
    "source": "GLM-130B (Zeng et al. 2022) DeepNorm: hidden = layernorm(attention_input * alpha + attention_output)",
}

NUM_LAYERS = 70


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.float16)
        nn.init.normal_(self.norm.weight, 1.0, 0.3)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)
        self.alpha = (2 * NUM_LAYERS) ** 0.5

    def forward(self, x, sublayer_out):
        # x is the sublayer's input (itself a LayerNorm output), sublayer_out is f(x).
        return self.norm(x * self.alpha + sublayer_out)


def get_inputs(tokens, hidden):
    # Sublayer outputs vary in scale from token to token.
    scale = torch.rand(tokens, 1, dtype=torch.float16) * 8 + 1
    return [
        torch.randn(tokens, hidden, dtype=torch.float16),
        torch.randn(tokens, hidden, dtype=torch.float16) * scale,
    ]


def get_init_inputs(hidden):
    return [hidden]
