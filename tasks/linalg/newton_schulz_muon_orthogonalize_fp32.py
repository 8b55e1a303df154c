"""Five quintic Newton-Schulz iterations that orthogonalise a gradient matrix, the core of the Muon optimizer."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "newton-schulz", "orthogonalization", "optimizer"],
    # perf: the Llama-3.2-1B gate_proj gradient (8192 x 2048, handled as its 2048 x 8192
    # transpose); 5 x 155 GFLOP = 773 GFLOP, ~15 ms at ~50 TFLOP/s fp32; < 0.3 GB of memory.
    "shapes": {
        "small": {"rows": 128, "cols": 64},
        "perf": {"rows": 8192, "cols": 2048},
    },
    "flops": "5 * (4 * min(rows, cols) ** 2 * max(rows, cols) + 2 * min(rows, cols) ** 3) + 3 * rows * cols",
    "bytes": "4 * 2 * rows * cols",
    # Muon runs this in bf16; here the contract is fp32 throughout. Outputs have entries
    # ~min(rows, cols)**-0.5 (0.01-0.1), so atol is 1e-5: fp32 reorderings stay near 1e-6 even
    # though the iteration amplifies small singular directions, while bf16 errors are ~1e-2.
    "tolerance": {"atol": 1e-5, "rtol": 1e-4},
    "source": "Muon optimizer zeropower_via_newtonschulz5 (Jordan et al. 2024; Moonlight)",
}

STEPS = 5


class Model(nn.Module):
    def forward(self, grad):
        a, b, c = 3.4445, -4.7750, 2.0315
        x = grad.mT if grad.size(-2) > grad.size(-1) else grad
        x = x / (x.norm() + 1e-7)
        for _ in range(STEPS):
            gram = x @ x.mT
            poly = b * gram + c * gram @ gram
            x = a * x + poly @ x
        return x.mT if grad.size(-2) > grad.size(-1) else x


def get_inputs(rows, cols):
    # Rows of different scale give the spread of singular values of a real gradient.
    scale = torch.rand(rows, 1, dtype=torch.float32) * 2 + 0.1
    return [torch.randn(rows, cols, dtype=torch.float32) * scale]


def get_init_inputs():
    return []
