"""SwiGLU: silu(x W_gate) * (x W_up) in bf16, the first half of a Llama MLP."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "glu", "silu", "mlp", "llama"],
    # perf: Llama-2-7B gate/up projections (4096 -> 11008), 2 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "inter": 176},
        "perf": {"tokens": 4096, "hidden": 4096, "inter": 11008},
    },
    "flops": "4 * tokens * hidden * inter + 5 * tokens * inter",
    "bytes": "2 * (tokens * hidden + 2 * hidden * inter + tokens * inter)",
    # rtol 2e-2: the reference rounds the gate and up projections, the activation and the
    # product to bf16 separately (up to ~1.5% relative), an fp32-epilogue kernel rounds once.
    "tolerance": {"atol": 2e-2, "rtol": 2e-2},
    "source": "Llama-2-7B MLP act_fn(gate_proj(x)) * up_proj(x)",
}


class Model(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False, dtype=torch.bfloat16)
        self.up_proj = nn.Linear(hidden, inter, bias=False, dtype=torch.bfloat16)
        for proj in (self.gate_proj, self.up_proj):
            nn.init.normal_(proj.weight, 0.0, proj.in_features ** -0.5)  # unit-variance outputs

    def forward(self, x):
        return torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, inter):
    return [hidden, inter]
