"""Per-sentence label-smoothed NLL of target tokens gathered from [batch, seq, vocab] decoder log-probs with int64 targets and padding (fairseq label_smoothed_nll_loss, no CTC)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["nll", "label_smoothing", "gather", "reduction", "seq2seq", "vocab"],
    # perf: M2M-100 (fairseq, 128112-token vocabulary) decoder output for 16 sentences x 256 target
    # tokens (2.1 GB of log-probs, read once by the smoothing sum; the gather touches 4096 values):
    # ~0.8 ms on an H100, ~2.2 GB of memory (4.3 GB while get_inputs builds the log-probs).
    "shapes": {
        "small": {"batch": 2, "seq": 16, "vocab": 1000},
        "perf": {"batch": 16, "seq": 256, "vocab": 128112},
    },
    "flops": "batch * seq * vocab + 6 * batch * seq",
    "bytes": "4 * batch * seq * vocab + 8 * batch * seq + 2 * 4 * batch",
    "source": "fairseq criterions/label_smoothed_cross_entropy.py (epsilon 0.1, padding_idx 1), M2M-100",
}


class Model(nn.Module):
    def __init__(self, epsilon=0.1, padding_idx=1):
        super().__init__()
        self.epsilon, self.padding_idx = epsilon, padding_idx

    def forward(self, lprobs, target):
        # Returns (smoothed loss, plain NLL), each summed over the non-pad tokens of a sentence.
        nll = -lprobs.gather(dim=-1, index=target.unsqueeze(-1)).squeeze(-1)
        smooth = -lprobs.sum(dim=-1)
        pad = target.eq(self.padding_idx)
        nll, smooth = nll.masked_fill(pad, 0.0).sum(-1), smooth.masked_fill(pad, 0.0).sum(-1)
        eps_i = self.epsilon / (lprobs.size(-1) - 1)
        return (1.0 - self.epsilon - eps_i) * nll + eps_i * smooth, nll


def get_inputs(batch, seq, vocab):
    lprobs = torch.log_softmax(torch.randn(batch, seq, vocab, dtype=torch.float32) * 3, dim=-1)
    # Real tokens never use the padding id (1); each sentence is padded after its own length.
    target = torch.randint(2, vocab, (batch, seq), dtype=torch.int64)
    lengths = torch.randint(1, seq + 1, (batch, 1))
    target = target.masked_fill(torch.arange(seq) >= lengths, 1)
    return [lprobs, target]


def get_init_inputs():
    return []
