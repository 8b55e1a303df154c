"""A Mixtral-style MoE layer in bf16 computed densely: fp32 top-2 routing over 8 experts, every SwiGLU expert run on every token, then the two chosen expert outputs gathered and mixed."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "bfloat16",
    "tags": ["moe", "router", "topk", "gather", "mlp", "swiglu", "gemm", "mixtral"],
    # perf: one Mixtral-8x7B MoE layer (hidden 4096, 8 experts of intermediate 14336, top-2) on
    # 2 x 512 tokens: 2.9 TFLOP of dense expert GEMMs (~5 ms) and 2.8 GB of expert weights read,
    # plus [8, 1024, 14336] SwiGLU intermediates (~1.5 GB moved): ~6 ms on an H100, ~4 GB of memory.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "inter": 128, "experts": 8},
        "perf": {"tokens": 1024, "hidden": 4096, "inter": 14336, "experts": 8},
    },
    # Dense: every expert processes every token (useful work would be top_k / experts of this).
    "flops": "6 * experts * tokens * hidden * inter + 2 * tokens * hidden * experts",
    "bytes": "2 * (2 * tokens * hidden + 3 * experts * hidden * inter) + 4 * hidden * experts",
    # As in the dense Llama MLP: bf16 projections and a 14336-long down-projection reduction,
    # then bf16 routing weights (as in HF Mixtral) and a bf16 mix; an implementation with fp32
    # intermediates differs by up to ~0.016 absolute on O(0.5) outputs, hence atol 3e-2.
    "tolerance": {"atol": 3e-2, "rtol": 2e-2},
    "source": "HF MixtralSparseMoeBlock (Mixtral-8x7B), dense-expert formulation; router in fp32",
}


class Model(nn.Module):
    def __init__(self, hidden, inter, experts, top_k=2):
        super().__init__()
        self.top_k = top_k
        # The router runs in fp32 so that top-2 choices are not ambiguous (bf16 logits tie).
        self.router = nn.Parameter(torch.empty(experts, hidden, dtype=torch.float32))
        nn.init.normal_(self.router, 0.0, hidden ** -0.5)
        # Stacked expert weights: w1 (gate) and w3 (up) [experts, inter, hidden], w2 (down) [experts, hidden, inter].
        self.w1 = nn.Parameter(torch.empty(experts, inter, hidden, dtype=torch.bfloat16))
        self.w3 = nn.Parameter(torch.empty(experts, inter, hidden, dtype=torch.bfloat16))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, inter, dtype=torch.bfloat16))
        for w in (self.w1, self.w3, self.w2):
            nn.init.normal_(w, 0.0, w.shape[-1] ** -0.5)  # unit-variance outputs

    def forward(self, x):
        tokens = x.shape[0]
        probs = torch.softmax(nn.functional.linear(x.to(self.router.dtype), self.router), dim=-1)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)  # [tokens, top_k]
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        # Every expert on every token: [experts, tokens, hidden].
        h = nn.functional.silu(x @ self.w1.transpose(1, 2)) * (x @ self.w3.transpose(1, 2))
        y = h @ self.w2.transpose(1, 2)
        picked = y[chosen, torch.arange(tokens, device=x.device)[:, None]]  # [tokens, top_k, hidden]
        return (weights.unsqueeze(-1) * picked).sum(dim=1)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, inter, experts):
    return [hidden, inter, experts]
