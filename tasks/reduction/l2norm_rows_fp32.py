"""L2 norm of every row of an embedding table, as in nGPT's row normalisation and embedding-norm monitoring."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "norm", "embedding"],
    # perf: the Llama-3-8B embedding table, 128256 x 4096.
    "shapes": {
        "small": {"vocab": 64, "hidden": 256},
        "perf": {"vocab": 128256, "hidden": 4096},
    },
    "flops": "2 * vocab * hidden",
    "bytes": "4 * (vocab * hidden + vocab)",
    "source": "Llama-3-8B embedding row norms",
}


class Model(nn.Module):
    def forward(self, table):
        return torch.linalg.vector_norm(table, dim=-1)


def get_inputs(vocab, hidden):
    # Rows of different scales, as in a trained table where frequent tokens have larger norms.
    return [torch.randn(vocab, hidden, dtype=torch.float32) * torch.rand(vocab, 1, dtype=torch.float32)]


def get_init_inputs():
    return []
