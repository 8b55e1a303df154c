"""Materialized 2-D transpose of bf16 activations, as fed to weight-gradient and FP8 GEMMs needing the other order."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "layout",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["transpose", "memory-bound"],
    # perf: 16 x 4096 tokens at Llama-70B width (8192), 1.07 GB read and written: ~0.7 ms
    # at ~3 TB/s, but ~4.5 ms for the eager transpose copy on an H100.
    "shapes": {
        "small": {"tokens": 48, "hidden": 80},
        "perf": {"tokens": 65536, "hidden": 8192},
    },
    "flops": "0",
    "bytes": "2 * 2 * tokens * hidden",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "activation transpose for the wgrad GEMM (Transformer Engine FP8 transpose)",
}


class Model(nn.Module):
    def forward(self, x):
        return x.t().contiguous()


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
