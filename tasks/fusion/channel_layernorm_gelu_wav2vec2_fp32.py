"""LayerNorm over the channels of a (batch, channels, time) conv output, then GELU: the wav2vec2 / XLS-R feature-encoder layer after its Conv1d."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["norm", "layernorm", "gelu", "channels-first", "audio"],
    # perf: wav2vec2-large-lv60 / XLS-R first feature-encoder layer (512 channels, 20 s of
    # 16 kHz audio -> 63999 frames), batch 4. Eager: transpose copy, LayerNorm, GELU: ~3 GB
    # moved, ~1 ms; ~2.1 GB of GPU memory.
    "shapes": {
        "small": {"batch": 2, "channels": 64, "frames": 199},
        "perf": {"batch": 4, "channels": 512, "frames": 63999},
    },
    "flops": "18 * batch * channels * frames",
    "bytes": "4 * (2 * batch * channels * frames + 2 * channels)",
    "source": "Hugging Face Wav2Vec2LayerNormConvLayer (feat_extract_norm='layer'): transpose, LayerNorm, transpose, GELU",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.layer_norm = nn.LayerNorm(channels, eps=1e-5, dtype=torch.float32)
        nn.init.normal_(self.layer_norm.weight, 1.0, 0.3)
        nn.init.normal_(self.layer_norm.bias, 0.0, 0.3)

    def forward(self, x):
        x = self.layer_norm(x.transpose(-2, -1)).transpose(-2, -1)
        return torch.nn.functional.gelu(x)


def get_inputs(batch, channels, frames):
    # Conv outputs: per-channel offsets and scales, so the channel statistics are not trivial.
    offset = torch.randn(channels, 1, dtype=torch.float32)
    scale = torch.rand(channels, 1, dtype=torch.float32) * 2 + 0.5
    return [torch.randn(batch, channels, frames, dtype=torch.float32) * scale + offset]


def get_init_inputs(channels):
    return [channels]
