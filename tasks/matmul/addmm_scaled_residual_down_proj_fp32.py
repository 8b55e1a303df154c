"""addmm with beta/alpha, out = beta * residual + alpha * (h @ W): a down-projection fused with DeepNet-style residual scaling."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "matmul",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "addmm", "residual", "epilogue"],
    # perf: 4096 tokens through a Llama-7B-width MLP down projection (11008 -> 4096); 369 GFLOP,
    # ~7.5 ms at ~50 TFLOP/s fp32; 0.5 GB of inputs, weight and output.
    "shapes": {
        "small": {"tokens": 32, "inter": 256, "hidden": 64},
        "perf": {"tokens": 4096, "inter": 11008, "hidden": 4096},
    },
    "flops": "2 * tokens * inter * hidden + 3 * tokens * hidden",
    "bytes": "4 * (tokens * inter + inter * hidden + 2 * tokens * hidden)",
    # W has entries ~inter**-0.5, so h @ W is O(1): fp32 reorderings stay near 1e-6; bf16 fails.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "DeepNet (Wang et al. 2022) residual up-weighting (2N)**0.25 with a depth-muP 1/sqrt(L) branch multiplier, as one torch.addmm",
}


class Model(nn.Module):
    def __init__(self, inter, hidden, beta, alpha):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(inter, hidden, dtype=torch.float32) / inter**0.5)
        self.beta = beta
        self.alpha = alpha

    def forward(self, residual, h):
        return torch.addmm(residual, h, self.weight, beta=self.beta, alpha=self.alpha)


def get_inputs(tokens, inter, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float32), torch.randn(tokens, inter, dtype=torch.float32)]


def get_init_inputs(inter, hidden):
    # 32 layers: beta = (2 * 32) ** 0.25, alpha = 32 ** -0.5.
    return [inter, hidden, 64**0.25, 32**-0.5]
