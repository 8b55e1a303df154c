"""Per-token label-smoothed cross-entropy (1 - eps) * NLL + eps * mean(-log p) over a 32000-token vocabulary, as in NMT / Transformer training."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["softmax", "loss", "label-smoothing", "gather", "reduction"],
    # perf: 32000-token BPE vocabulary (Transformer-big WMT / Llama-2 / Mistral tokenizers),
    # 8192 target tokens. Eager: ~3.2 GB moved (~1.1 ms); peak ~2.1 GB.
    "shapes": {
        "small": {"tokens": 16, "vocab": 1000},
        "perf": {"tokens": 8192, "vocab": 32000},
    },
    "flops": "5 * tokens * vocab",
    "bytes": "4 * tokens * vocab + 8 * tokens + 4 * tokens",
    "source": "fairseq label_smoothed_cross_entropy / F.cross_entropy(label_smoothing=0.1, reduction='none')",
}


class Model(nn.Module):
    def __init__(self, eps=0.1):
        super().__init__()
        self.eps = eps

    def forward(self, logits, targets):
        log_probs = torch.log_softmax(logits, dim=-1)
        nll = -log_probs.gather(-1, targets[:, None]).squeeze(-1)
        smooth = -log_probs.mean(dim=-1)
        return (1 - self.eps) * nll + self.eps * smooth


def get_inputs(tokens, vocab):
    # Per-token logit scales differ, as a trained model is confident on some tokens and not others.
    scale = torch.rand(tokens, 1, dtype=torch.float32) * 3 + 0.5
    return [
        torch.randn(tokens, vocab, dtype=torch.float32) * scale,
        torch.randint(0, vocab, (tokens,), dtype=torch.int64),
    ]


def get_init_inputs():
    return []
