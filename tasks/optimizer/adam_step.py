"""One functional Adam step (bias-corrected moments, no weight decay) over a flat fp32 parameter shard."""

import math

import torch
import torch.nn as nn

KBENCH = {
    "category": "optimizer",
    "level": 2,
    "dtype": "float32",
    "tags": ["optimizer", "pointwise", "adam"],
    # perf: Llama-2-7B's 6,738,415,616 parameters as one flat ZeRO/FSDP shard of 64 ranks.
    "shapes": {
        "small": {"numel": 4096},
        "perf": {"numel": 105287744},
    },
    "flops": "12 * numel",
    "bytes": "4 * 7 * numel",
    # Updates are ~lr-sized, so the default atol (1e-4) would hide them; fp32 reordering
    # (FMA, foreach kernels) changes results by ~1e-7 relative.
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "source": "torch.optim.Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8), single_tensor_adam at step 1000",
}


class Model(nn.Module):
    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, step=1000):
        super().__init__()
        self.lr, self.beta1, self.beta2, self.eps, self.step = lr, beta1, beta2, eps, step

    def forward(self, param, grad, exp_avg, exp_avg_sq):
        exp_avg = exp_avg.lerp(grad, 1 - self.beta1)
        exp_avg_sq = exp_avg_sq.mul(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        step_size = self.lr / (1 - self.beta1 ** self.step)
        denom = (exp_avg_sq.sqrt() / math.sqrt(1 - self.beta2 ** self.step)).add_(self.eps)
        return param.addcdiv(exp_avg, denom, value=-step_size), exp_avg, exp_avg_sq


def get_inputs(numel):
    return [
        torch.randn(numel, dtype=torch.float32),
        torch.randn(numel, dtype=torch.float32),
        torch.randn(numel, dtype=torch.float32) * 0.1,
        torch.rand(numel, dtype=torch.float32),  # second moments are non-negative
    ]


def get_init_inputs():
    return []
