"""EMA weight averaging ema = ema.lerp(param, 1 - decay) over a flat fp32 parameter shard, as in model EMA for diffusion and LLM training."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "lerp", "ema", "optimizer"],
    # perf: Llama-2-7B's 6,738,415,616 parameters as one flat shard of 32 ranks.
    # Eager: one lerp kernel, 3 x 842 MB moved -> ~0.85 ms on an H100; 2.5 GB of GPU memory.
    "shapes": {
        "small": {"numel": 4096},
        "perf": {"numel": 210575488},
    },
    "flops": "3 * numel",
    "bytes": "3 * 4 * numel",
    # The step is (1 - decay) = 1e-4 of |param - ema|, so the default atol (1e-4) would hide it;
    # fp32 reordering (ema*decay + param*(1-decay), FMA) changes results by ~1e-7 relative.
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "source": "torch.optim.swa_utils.get_ema_multi_avg_fn (torch._foreach_lerp_), decay 0.9999",
}


class Model(nn.Module):
    def __init__(self, decay=0.9999):
        super().__init__()
        self.decay = decay

    def forward(self, ema, param):
        return torch.lerp(ema, param, 1.0 - self.decay)


def get_inputs(numel):
    ema = torch.randn(numel, dtype=torch.float32)
    # The live weights have drifted from their 10k-step average by ~10%.
    param = ema + 0.1 * torch.randn(numel, dtype=torch.float32)
    return [ema, param]


def get_init_inputs():
    return []
