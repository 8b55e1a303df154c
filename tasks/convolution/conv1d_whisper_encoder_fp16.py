"""Stride-2 kernel-3 Conv1d with bias over the audio frames, the second input convolution of the Whisper encoder."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "convolution",
    "level": 1,
    "dtype": "float16",
    "tags": ["conv1d", "implicit_gemm", "audio"],
    # perf: Whisper large-v3 conv2 (1280 -> 1280 channels, 3000 -> 1500 frames), 16 30-second clips.
    "shapes": {
        "small": {"batch": 2, "channels": 32, "frames": 64},
        "perf": {"batch": 16, "channels": 1280, "frames": 3000},
    },
    "flops": "2 * batch * channels * channels * 3 * (frames // 2)",
    "bytes": "2 * (batch * channels * (frames + frames // 2) + 3 * channels * channels + channels)",
    "source": "Whisper AudioEncoder.conv2 (OpenAI whisper / HF WhisperEncoder)",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, stride=2, padding=1, dtype=torch.float16)
        nn.init.normal_(self.conv.bias, 0.0, 0.5)  # the default init is too small to matter at fp16 tolerance

    def forward(self, x):
        return self.conv(x)


def get_inputs(batch, channels, frames):
    return [torch.randn(batch, channels, frames, dtype=torch.float16)]


def get_init_inputs(channels):
    return [channels]
