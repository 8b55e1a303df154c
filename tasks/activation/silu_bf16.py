"""SiLU (swish) over the bf16 gate projection of a SwiGLU MLP, as in Llama-3 and Mistral."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "activation",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["pointwise", "mlp", "llama"],
    # perf: Llama-3-8B gate projection (intermediate 14336), 4 sequences x 8192 tokens.
    "shapes": {
        "small": {"tokens": 64, "ffn": 256},
        "perf": {"tokens": 32768, "ffn": 14336},
    },
    "flops": "5 * tokens * ffn",
    "bytes": "2 * 2 * tokens * ffn",
    "source": "Llama-3-8B SwiGLU gate activation",
}


class Model(nn.Module):
    def forward(self, gate):
        return nn.functional.silu(gate)


def get_inputs(tokens, ffn):
    return [torch.randn(tokens, ffn, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
