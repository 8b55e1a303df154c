"""Masked-LM head transform: Linear with bias, erf-GELU, then LayerNorm (before the vocabulary projection), as in BERT / RoBERTa / XLM-R."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["gemm", "epilogue", "gelu", "layernorm", "bert"],
    # perf: XLM-RoBERTa-XL lm_head transform (hidden 2560), 64 sequences x 512 tokens.
    # ~0.43 TFLOP: ~0.7 ms GEMM + ~0.2 ms for the eager GELU and LayerNorm; ~0.7 GB.
    "shapes": {
        "small": {"tokens": 64, "hidden": 128},
        "perf": {"tokens": 32768, "hidden": 2560},
    },
    "flops": "2 * tokens * hidden * hidden + 20 * tokens * hidden",
    "bytes": "2 * (2 * tokens * hidden + hidden * hidden + 3 * hidden)",
    "source": "Hugging Face XLMRobertaXLLMHead: layer_norm(gelu(dense(features))) (eps 1e-5)",
}


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden, bias=True, dtype=torch.float16)
        self.layer_norm = nn.LayerNorm(hidden, eps=1e-5, dtype=torch.float16)
        nn.init.normal_(self.dense.weight, 0.0, hidden ** -0.5)  # unit-variance pre-activations
        nn.init.normal_(self.dense.bias, 0.0, 0.5)
        nn.init.normal_(self.layer_norm.weight, 1.0, 0.3)
        nn.init.normal_(self.layer_norm.bias, 0.0, 0.1)

    def forward(self, features):
        return self.layer_norm(torch.nn.functional.gelu(self.dense(features)))


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.float16)]


def get_init_inputs(hidden):
    return [hidden]
