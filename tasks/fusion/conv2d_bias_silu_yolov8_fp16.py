"""3x3 conv with bias (BatchNorm folded in) followed by SiLU in fp16: the fused Conv block of YOLOv5/v8 and EfficientNet-style CNNs at inference."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["conv", "silu", "bias", "cnn", "detection"],
    # perf: YOLOv8-l C2f bottleneck at stride 4 (64 -> 64 channels, 3x3, 160x160 for 640x640 input),
    # batch 128 validation. Eager: 242 GFLOP conv (~0.5 ms) + ~1.7 GB moved (~0.6 ms); peak ~1.3 GB.
    "shapes": {
        "small": {"batch": 2, "in_ch": 8, "out_ch": 8, "size": 16},
        "perf": {"batch": 128, "in_ch": 64, "out_ch": 64, "size": 160},
    },
    "flops": "2 * batch * out_ch * in_ch * 9 * size ** 2 + 5 * batch * out_ch * size ** 2",
    "bytes": "2 * (batch * in_ch * size ** 2 + out_ch * in_ch * 9 + out_ch + batch * out_ch * size ** 2)",
    "source": "ultralytics Conv.forward_fuse (conv with folded BN) + SiLU",
}


class Model(nn.Module):
    def __init__(self, in_ch, out_ch):
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=True, dtype=torch.float16)
        nn.init.normal_(self.conv.weight, 0.0, (in_ch * 9) ** -0.5)  # unit-variance outputs
        nn.init.normal_(self.conv.bias, 0.0, 0.5)  # a folded BN shift is O(1)

    def forward(self, x):
        return nn.functional.silu(self.conv(x))


def get_inputs(batch, in_ch, size):
    return [torch.randn(batch, in_ch, size, size, dtype=torch.float16)]


def get_init_inputs(in_ch, out_ch):
    return [in_ch, out_ch]
