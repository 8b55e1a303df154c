"""Linear (no bias) followed by squared ReLU, relu(x W)^2, in bf16: the MLP up-projection of Nemotron-4 (Primer activation)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "epilogue", "squared-relu", "mlp", "nemotron"],
    # perf: Nemotron-4-15B fc1 (6144 -> 24576, squared ReLU), one 4096-token sequence.
    # ~1.24 TFLOP: ~2.1 ms GEMM + ~0.3 ms for eager relu and square; ~1 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "inter": 256},
        "perf": {"tokens": 4096, "hidden": 6144, "inter": 24576},
    },
    "flops": "2 * tokens * hidden * inter + 2 * tokens * inter",
    "bytes": "2 * (tokens * hidden + hidden * inter + tokens * inter)",
    # rtol 3e-2: the reference rounds the projection to bf16 before squaring, which doubles
    # that rounding error (up to ~0.8%); with the output's rounding an fp32-epilogue kernel can
    # be 2 bf16 ulps (up to ~1.6%) away.
    "tolerance": {"atol": 1e-2, "rtol": 3e-2},
    "source": "Nemotron-4 15B/340B MLP: squared_relu(linear_fc1(x)) (Megatron-LM, So et al. 2021 Primer)",
}


class Model(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.fc1 = nn.Linear(hidden, inter, bias=False, dtype=torch.bfloat16)
        nn.init.normal_(self.fc1.weight, 0.0, hidden ** -0.5)  # unit-variance pre-activations

    def forward(self, x):
        return torch.relu(self.fc1(x)).square()


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, inter):
    return [hidden, inter]
