"""Per-output-channel symmetric int8 quantization of an fp32 weight matrix (W8A8 / int8 weight-only checkpoints)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "int8",
    "tags": ["quantize", "int8", "per-channel", "reduction"],
    # perf: a Llama-3-8B gate/up projection weight (14336 x 4096, 235 MB fp32); eagerly
    # ~2.5 GB of temporaries are moved: ~0.8 ms.
    "shapes": {
        "small": {"rows": 64, "cols": 256},
        "perf": {"rows": 14336, "cols": 4096},
    },
    "flops": "5 * rows * cols",
    "bytes": "4 * rows * cols + rows * cols",
    # Numerics contract (integer output): in fp32, scale[r] = amax(|w[r, :]|) / 127;
    # q = clamp(round_half_even(w / scale[r]), -127, 127). At most 0.1% of the q may
    # differ from the reference (multiplying by the reciprocal of the scale rounds
    # differently near ties: torch.compile, 33 of 58.7M).
    "tolerance": {"atol": 0, "rtol": 0, "mismatch_fraction": 0.001},
    "source": "per-channel int8 weight quantization (SmoothQuant, LLM.int8 weights)",
}


class Model(nn.Module):
    def forward(self, weight):
        scale = weight.abs().amax(dim=1, keepdim=True) / 127.0
        return torch.round(weight / scale).clamp_(-127, 127).to(torch.int8)


def get_inputs(rows, cols):
    return [torch.randn(rows, cols, dtype=torch.float32) * 0.02]


def get_init_inputs():
    return []
