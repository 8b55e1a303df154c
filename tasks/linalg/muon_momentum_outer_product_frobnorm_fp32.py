"""Outer-product gradient accumulation dW = dY^T X into Muon's momentum, then the Nesterov update normalised by its Frobenius norm."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "linalg",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "outer-product", "frobenius-norm", "optimizer"],
    # perf: the Llama-3-8B q_proj (4096 x 4096) gradient over 8192 tokens; 275 GFLOP,
    # ~5.5 ms at ~50 TFLOP/s fp32; ~0.6 GB of inputs, outputs and temporaries.
    "shapes": {
        "small": {"tokens": 64, "d_in": 128, "d_out": 96},
        "perf": {"tokens": 8192, "d_in": 4096, "d_out": 4096},
    },
    "flops": "2 * tokens * d_in * d_out + 7 * d_in * d_out",
    "bytes": "4 * (tokens * d_in + tokens * d_out + 3 * d_in * d_out)",
    # Gradients and momentum are ~1e-4 per entry and the normalised update ~(d_in * d_out)**-0.5
    # (2.4e-4 at the perf shape), so atol is 2e-8, ~1e-4 of a typical entry: fp32 reorderings of
    # the token sum err by ~1e-6 of a typical entry, while bf16 errs by ~4e-3 relative.
    "tolerance": {"atol": 2e-8, "rtol": 1e-4},
    "source": "Muon optimizer momentum + Nesterov step before Newton-Schulz (KellerJordan/Muon)",
}


class Model(nn.Module):
    def __init__(self, momentum):
        super().__init__()
        self.momentum = momentum

    def forward(self, x, grad_out, buf):
        grad_w = grad_out.t() @ x  # sum over tokens of the outer products dy_t x_t^T
        buf = self.momentum * buf + grad_w
        update = grad_w + self.momentum * buf
        return buf, update / (update.norm() + 1e-7)


def get_inputs(tokens, d_in, d_out):
    x = torch.randn(tokens, d_in, dtype=torch.float32)
    grad_out = torch.randn(tokens, d_out, dtype=torch.float32) * (1e-4 / tokens**0.5)
    buf = torch.randn(d_out, d_in, dtype=torch.float32) * 1e-4
    return [x, grad_out, buf]


def get_init_inputs():
    return [0.95]
