"""MLP output projection with bias, LayerScale (per-channel gamma) and residual add, x + gamma * (h W + b): every DINOv2 / CaiT block."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "epilogue", "residual", "layerscale", "vit"],
    # perf: DINOv2 ViT-L/14 mlp.fc2 (4096 -> 1024) at 224 px, batch 64 x 257 tokens.
    # ~138 GFLOP fp32: ~2.8 ms GEMM + ~0.1 ms for the eager scale and add; ~0.5 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "inter": 128, "hidden": 64},
        "perf": {"tokens": 16448, "inter": 4096, "hidden": 1024},
    },
    "flops": "2 * tokens * inter * hidden + 3 * tokens * hidden",
    "bytes": "4 * (tokens * inter + inter * hidden + 2 * hidden + 2 * tokens * hidden)",
    "source": "DINOv2 ViT-L/14 block: x + ls2(mlp.fc2(h)) (LayerScale, Touvron et al. CaiT)",
}


class Model(nn.Module):
    def __init__(self, inter, hidden):
        super().__init__()
        self.fc2 = nn.Linear(inter, hidden, bias=True, dtype=torch.float32)
        nn.init.normal_(self.fc2.weight, 0.0, inter ** -0.5)  # unit-variance outputs
        nn.init.normal_(self.fc2.bias, 0.0, 0.1)
        # Trained LayerScale values: small, positive, different per channel.
        self.gamma = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.uniform_(self.gamma, 0.05, 0.5)

    def forward(self, h, x):
        return x + self.gamma * self.fc2(h)


def get_inputs(tokens, inter, hidden):
    return [
        torch.randn(tokens, inter, dtype=torch.float32),
        torch.randn(tokens, hidden, dtype=torch.float32),
    ]


def get_init_inputs(inter, hidden):
    return [inter, hidden]
