"""One functional Lion step (sign of interpolated momentum, decoupled weight decay) over a flat fp32 parameter shard."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "optimizer",
    "level": 2,
    "dtype": "float32",
    "tags": ["optimizer", "pointwise", "lion", "sign"],
    # perf: Llama-2-7B's 6,738,415,616 parameters as one flat ZeRO/FSDP shard of 64 ranks.
    # Eager: ~6 kernels, ~15 x 421 MB moved -> ~2 ms on an H100; 2.5 GB of GPU memory.
    "shapes": {
        "small": {"numel": 4096},
        "perf": {"numel": 105287744},
    },
    "flops": "8 * numel",
    "bytes": "4 * 5 * numel",
    # Updates are lr-sized (1e-4), so the default atol (1e-4) would hide them; fp32 reordering
    # (FMA, lerp) changes results by ~1e-7 relative.
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "source": "Lion (Chen et al. 2023), lion-pytorch update_fn: lr=1e-4, betas=(0.9, 0.99), weight_decay=1.0",
}

BETA1, BETA2 = 0.9, 0.99


class Model(nn.Module):
    def __init__(self, lr=1e-4, beta1=BETA1, beta2=BETA2, weight_decay=1.0):
        super().__init__()
        self.lr, self.beta1, self.beta2, self.weight_decay = lr, beta1, beta2, weight_decay

    def forward(self, param, grad, exp_avg):
        param = param.mul(1 - self.lr * self.weight_decay)
        update = exp_avg.mul(self.beta1).add_(grad, alpha=1 - self.beta1).sign_()
        param.add_(update, alpha=-self.lr)
        return param, exp_avg.lerp(grad, 1 - self.beta2)


def get_inputs(numel):
    param = torch.randn(numel, dtype=torch.float32)
    exp_avg = torch.randn(numel, dtype=torch.float32) * 0.1
    # Tie-free signs: the interpolation c = beta1 * m + (1 - beta1) * g is drawn first with
    # |c| >= 1e-3, far from the ~1e-8 rounding of any evaluation order, and g is solved from it
    # (g ends up ~N(0, 1.35^2), like a gradient). The sign is drawn as +-1 directly: randn's
    # sign is 0 where it returns exactly 0.0, which CUDA's generator does about once in 2^23
    # draws (3 sign ties, each an honest 2 * lr mismatch, in one 105M-element call on an H100).
    sign = torch.randint(0, 2, (numel,), dtype=torch.float32) * 2 - 1
    c = (1e-3 + 0.1 * torch.randn(numel, dtype=torch.float32).abs()) * sign
    grad = (c - BETA1 * exp_avg) / (1 - BETA1)
    return [param, grad, exp_avg]


def get_init_inputs():
    return []
