"""Reverse (suffix) cumulative sum along the sequence, the backward of a cumsum over time (e.g. of GLA/Mamba-2 log-decays)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "float32",
    "tags": ["scan", "sequence", "reverse"],
    # perf: 16 sequences x 2048 tokens at width 4096.
    "shapes": {
        "small": {"batch": 2, "seq": 64, "hidden": 32},
        "perf": {"batch": 16, "seq": 2048, "hidden": 4096},
    },
    "flops": "batch * seq * hidden",
    "bytes": "2 * 4 * batch * seq * hidden",
    # Signed inputs: suffix sums pass near zero after ~2048 additions, where another legitimate
    # summation order differs by ~1e-4 absolute; atol 1e-3 allows that (bf16 still fails).
    "tolerance": {"atol": 1e-3, "rtol": 1e-4},
    "source": "Cumsum backward over the sequence",
}


class Model(nn.Module):
    def forward(self, grad):
        return torch.cumsum(grad.flip(1), dim=1).flip(1)


def get_inputs(batch, seq, hidden):
    return [torch.randn(batch, seq, hidden, dtype=torch.float32)]


def get_init_inputs():
    return []
