"""A Llama MLP block in bf16: down_proj(silu(gate_proj(x)) * up_proj(x))."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "bfloat16",
    "tags": ["mlp", "gemm", "swiglu", "llama"],
    # perf: Llama-3-8B MLP (hidden 4096, intermediate 14336), 2 x 2048 tokens.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "inter": 224},
        "perf": {"tokens": 4096, "hidden": 4096, "inter": 14336},
    },
    "flops": "6 * tokens * hidden * inter + 5 * tokens * inter",
    "bytes": "2 * (2 * tokens * hidden + 3 * hidden * inter)",
    # 2e-2: the reference rounds the projections, the activation and the product to bf16
    # before a 14336-long down-projection reduction; a fused kernel that keeps fp32
    # intermediates differs by up to ~1.5% on individual outputs.
    "tolerance": {"atol": 2e-2, "rtol": 2e-2},
    "source": "HF LlamaMLP (Llama-3-8B)",
}


class Model(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False, dtype=torch.bfloat16)
        self.up_proj = nn.Linear(hidden, inter, bias=False, dtype=torch.bfloat16)
        self.down_proj = nn.Linear(inter, hidden, bias=False, dtype=torch.bfloat16)
        for proj in (self.gate_proj, self.up_proj, self.down_proj):
            nn.init.normal_(proj.weight, 0.0, proj.in_features ** -0.5)  # unit-variance outputs

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, inter):
    return [hidden, inter]
