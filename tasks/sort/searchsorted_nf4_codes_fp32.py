"""Bucket index (int64) of absmax-normalized fp32 weights among the 15 sorted midpoints of the NF4 code, i.e. the nearest-code search of QLoRA 4-bit quantization."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["searchsorted", "bucketize", "quantization", "nf4", "llama"],
    # perf: Llama-3-70B gate_proj, 28672 x 8192 weights. Eager: one searchsorted kernel,
    # 940 MB read + 1.9 GB written -> ~1 ms on an H100; 2.8 GB of GPU memory.
    "shapes": {
        "small": {"rows": 64, "cols": 256},
        "perf": {"rows": 28672, "cols": 8192},
    },
    "flops": "4 * rows * cols",
    "bytes": "(4 + 8) * rows * cols",
    "source": "QLoRA NF4 quantization (bitsandbytes quantize_4bit): nearest of 16 NF4 levels per weight",
}

# The 16 NormalFloat-4 levels of bitsandbytes, ascending.
NF4 = [
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        levels = torch.tensor(NF4, dtype=torch.float32)
        self.register_buffer("boundaries", (levels[1:] + levels[:-1]) / 2)  # 15, ascending

    def forward(self, x):
        return torch.searchsorted(self.boundaries, x)


def get_inputs(rows, cols):
    # Weights divided by the absmax of their 64-element block, as before NF4 rounding.
    w = torch.randn(rows, cols // 64, 64, dtype=torch.float32)
    return [(w / w.abs().amax(dim=-1, keepdim=True)).view(rows, cols)]


def get_init_inputs():
    return []
