"""Row-wise logsumexp of fp32 logits over the Llama-3 vocabulary, the log-partition log Z of cross-entropy and of the z-loss (log Z)^2."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "logsumexp", "logits", "loss"],
    # perf: 2 x 2048 tokens over Llama-3's 128256-token vocabulary. Eager torch.logsumexp is
    # amax, sub, exp_, sum: ~6 x 2.1 GB moved -> ~4 ms on an H100; 4.2 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 16, "vocab": 2048},
        "perf": {"tokens": 4096, "vocab": 128256},
    },
    "flops": "3 * tokens * vocab",
    "bytes": "4 * (tokens * vocab + tokens)",
    "source": "Llama-3 cross-entropy log-partition; PaLM/OLMo z-loss",
}


class Model(nn.Module):
    def forward(self, logits):
        return torch.logsumexp(logits, dim=-1)


def get_inputs(tokens, vocab):
    # Per-token temperature and offset, so log Z differs from token to token.
    scale = 1 + 2 * torch.rand(tokens, 1, dtype=torch.float32)
    offset = 4 * torch.randn(tokens, 1, dtype=torch.float32)
    return [torch.randn(tokens, vocab, dtype=torch.float32) * scale + offset]


def get_init_inputs():
    return []
