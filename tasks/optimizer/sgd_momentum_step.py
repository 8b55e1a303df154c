"""One functional SGD step with momentum and weight decay over a flat fp32 parameter shard (torch.optim.SGD semantics)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "optimizer",
    "level": 2,
    "dtype": "float32",
    "tags": ["optimizer", "pointwise", "sgd"],
    # perf: Llama-2-7B's 6,738,415,616 parameters as one flat ZeRO/FSDP shard of 64 ranks.
    "shapes": {
        "small": {"numel": 4096},
        "perf": {"numel": 105287744},
    },
    "flops": "5 * numel",
    "bytes": "4 * 5 * numel",
    # Updates are ~lr-sized, so the default atol (1e-4) would hide them; fp32 reordering
    # (FMA, foreach kernels) changes results by ~1e-7 relative.
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "source": "torch.optim.SGD(momentum=0.9, weight_decay=1e-4, dampening=0, nesterov=False)",
}


class Model(nn.Module):
    def __init__(self, lr=0.01, momentum=0.9, weight_decay=1e-4):
        super().__init__()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay

    def forward(self, param, grad, momentum_buffer):
        d_p = grad.add(param, alpha=self.weight_decay)
        buf = momentum_buffer.mul(self.momentum).add_(d_p)
        return param.add(buf, alpha=-self.lr), buf


def get_inputs(numel):
    return [
        torch.randn(numel, dtype=torch.float32),
        torch.randn(numel, dtype=torch.float32),
        torch.randn(numel, dtype=torch.float32),
    ]


def get_init_inputs():
    return []
