"""logcumsumexp along the sequence, the log-space parallel scan of minGRU/minLSTM (Heinsen's scan)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "scan",
    "level": 1,
    "dtype": "float32",
    "tags": ["scan", "sequence", "log-space", "rnn"],
    # perf: 16 sequences x 4096 tokens at hidden size 4096.
    "shapes": {
        "small": {"batch": 2, "seq": 64, "hidden": 32},
        "perf": {"batch": 16, "seq": 4096, "hidden": 4096},
    },
    "flops": "4 * batch * seq * hidden",
    "bytes": "2 * 4 * batch * seq * hidden",
    "source": "minGRU log-space parallel scan",
}


class Model(nn.Module):
    def forward(self, log_values):
        return torch.logcumsumexp(log_values, dim=1)


def get_inputs(batch, seq, hidden):
    return [torch.randn(batch, seq, hidden, dtype=torch.float32)]


def get_init_inputs():
    return []
