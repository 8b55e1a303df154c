"""Cumulative product of forget gates along the sequence, the decay factors of gated linear attention / RNNs (GLA, xLSTM)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "float32",
    "tags": ["scan", "sequence", "product", "linear-attention"],
    # perf: 8 sequences x 8192 tokens of per-channel gates at width 4096.
    "shapes": {
        "small": {"batch": 2, "seq": 64, "channels": 32},
        "perf": {"batch": 8, "seq": 8192, "channels": 4096},
    },
    "flops": "batch * seq * channels",
    "bytes": "2 * 4 * batch * seq * channels",
    "source": "Gated linear attention decay cumprod",
}


class Model(nn.Module):
    def forward(self, gates):
        return torch.cumprod(gates, dim=1)


def get_inputs(batch, seq, channels):
    # Gates in (1 - 8/seq, 1] with a decay rate per channel: over the whole sequence the
    # products end between about exp(-4) and 1, neither vanishing nor overflowing.
    rate = torch.rand(channels, dtype=torch.float32) * (8.0 / seq)
    return [1.0 - torch.rand(batch, seq, channels, dtype=torch.float32) * rate]


def get_init_inputs():
    return []
