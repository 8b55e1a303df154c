"""ConvNeXt block head in bf16: depthwise 7x7 conv, permute NCHW -> NHWC, LayerNorm over channels (eps 1e-6)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["conv", "depthwise", "layernorm", "permute", "cnn", "convnext"],
    # perf: ConvNeXt-B stage 1 (128 channels at 56x56 for 224x224 input), batch 256.
    # Eager: depthwise conv + LayerNorm on a permuted (non-contiguous) view, ~1.2 GB moved
    # (~0.5-1 ms, the depthwise conv dominates); peak ~0.8 GB.
    "shapes": {
        "small": {"batch": 2, "channels": 32, "size": 8},
        "perf": {"batch": 256, "channels": 128, "size": 56},
    },
    "flops": "2 * 49 * batch * channels * size ** 2 + 8 * batch * channels * size ** 2",
    "bytes": "2 * (2 * batch * channels * size ** 2 + 52 * channels)",
    # rtol 2e-2: the reference rounds the conv output to bf16 before the LayerNorm; a kernel that
    # normalizes its fp32 accumulator lands up to ~2 bf16 ulps away on outputs of 2-4.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "facebookresearch/ConvNeXt Block.forward: dwconv -> permute(0, 2, 3, 1) -> LayerNorm",
}


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.dwconv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels, dtype=torch.bfloat16)
        self.norm = nn.LayerNorm(channels, eps=1e-6, dtype=torch.bfloat16)
        nn.init.normal_(self.dwconv.weight, 0.0, 49 ** -0.5)
        nn.init.normal_(self.dwconv.bias, 0.0, 0.5)
        nn.init.normal_(self.norm.weight, 1.0, 0.2)
        nn.init.normal_(self.norm.bias, 0.0, 0.2)

    def forward(self, x):
        return self.norm(self.dwconv(x).permute(0, 2, 3, 1))


def get_inputs(batch, channels, size):
    return [torch.randn(batch, channels, size, size, dtype=torch.bfloat16)]


def get_init_inputs(channels):
    return [channels]
