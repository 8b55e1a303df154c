"""adaLN-Zero gating: a [batch, seq, hidden] fp16 activation times a per-sample [batch, 1, hidden] gate, as in DiT/Flux blocks."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float16",
    "tags": ["pointwise", "broadcast", "diffusion"],
    # perf: Flux at 1024x1024 (4096 image + 512 text tokens), hidden 3072, batch 32.
    "shapes": {
        "small": {"batch": 2, "seq": 32, "hidden": 64},
        "perf": {"batch": 32, "seq": 4608, "hidden": 3072},
    },
    "flops": "batch * seq * hidden",
    "bytes": "2 * (2 * batch * seq * hidden + batch * hidden)",
    "source": "DiT / Flux adaLN-Zero gate multiply",
}


class Model(nn.Module):
    def forward(self, x, gate):
        return x * gate


def get_inputs(batch, seq, hidden):
    return [
        torch.randn(batch, seq, hidden, dtype=torch.float16),
        torch.randn(batch, 1, hidden, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
