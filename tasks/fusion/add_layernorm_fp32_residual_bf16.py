"""Pre-LN residual add + LayerNorm with an fp32 residual stream and bf16 activations (dropout p=0, prenorm, residual_in_fp32), returning the bf16 normed output and the fp32 residual."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["norm", "layernorm", "residual", "mixed-precision"],
    # perf: Pythia-12B (GPT-NeoX architecture, hidden 5120), 8 x 2048 tokens. Eager: upcast,
    # add, LayerNorm, downcast: ~2.5 GB moved, ~0.8 ms; ~1.5 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 5120},
    },
    "flops": "9 * tokens * hidden",
    "bytes": "tokens * hidden * (2 + 4 + 2 + 4) + 2 * 2 * hidden",
    "source": "flash-attn layer_norm_fn (dropout_p=0, prenorm=True, residual_in_fp32=True) in its GPT blocks (fused_dropout_add_ln), e.g. its GPT-NeoX/Pythia port",
}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.bfloat16)
        nn.init.normal_(self.norm.weight, 1.0, 0.3)
        nn.init.normal_(self.norm.bias, 0.0, 0.1)

    def forward(self, x, residual):
        # x: the sublayer's bf16 output; residual: the fp32 residual stream.
        fp32 = residual.dtype
        residual = x.to(fp32) + residual
        weight, bias = self.norm.weight.to(fp32), self.norm.bias.to(fp32)
        out = torch.nn.functional.layer_norm(residual, residual.shape[-1:], weight, bias, self.norm.eps)
        return out.to(x.dtype), residual


def get_inputs(tokens, hidden):
    # The residual stream grows in magnitude through the network: per-token scales.
    scale = torch.rand(tokens, 1, dtype=torch.float32) * 8 + 1
    return [
        torch.randn(tokens, hidden, dtype=torch.bfloat16),
        torch.randn(tokens, hidden, dtype=torch.float32) * scale,
    ]


def get_init_inputs(hidden):
    return [hidden]
