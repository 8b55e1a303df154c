"""Power-law compression |X|^0.3 of a magnitude spectrogram, the input/target transform of speech-enhancement models (CMGAN, MP-SENet)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "elementwise",
    "level": 1,
    "dtype": "float32",
    "tags": ["pointwise", "transcendental", "audio"],
    # perf: 64 ten-second 48 kHz clips, n_fft 2048 (1025 bins), hop 120 (4000 frames).
    "shapes": {
        "small": {"batch": 2, "freq": 65, "frames": 100},
        "perf": {"batch": 64, "freq": 1025, "frames": 4000},
    },
    "flops": "2 * batch * freq * frames",
    "bytes": "2 * 4 * batch * freq * frames",
    "source": "Compressed-magnitude speech enhancement (CMGAN, MP-SENet)",
}

EXPONENT = 0.3


class Model(nn.Module):
    def forward(self, magnitude):
        return torch.pow(magnitude, EXPONENT)


def get_inputs(batch, freq, frames):
    # Log-normal magnitudes: strictly positive and spanning several decades.
    return [torch.randn(batch, freq, frames, dtype=torch.float32).exp()]


def get_init_inputs():
    return []
