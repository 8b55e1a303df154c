"""Token-embedding lookup scaled by sqrt(hidden) (the normalizer rounded to bf16), the input layer of Gemma / Gemma-2."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["embedding", "gather", "scaling", "memory-bound", "gemma"],
    # perf: Gemma-2-27B table (256000 x 4608, 2.36 GB), 8 x 8192 tokens. Eager gather + mul:
    # ~2.4 GB moved, ~0.8 ms; ~3.6 GB of GPU memory.
    "shapes": {
        "small": {"batch": 2, "seq": 32, "vocab": 1000, "hidden": 96},
        "perf": {"batch": 8, "seq": 8192, "vocab": 256000, "hidden": 4608},
    },
    "flops": "batch * seq * hidden",
    "bytes": "8 * batch * seq + 2 * 2 * batch * seq * hidden",
    "source": "Hugging Face Gemma2Model: embed_tokens(input_ids) * torch.tensor(hidden_size ** 0.5, dtype=bf16)",
}


class Model(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden, dtype=torch.bfloat16)
        nn.init.normal_(self.embed_tokens.weight, 0.0, hidden ** -0.5)  # unit-scale rows after scaling
        # Gemma builds the normalizer as a bf16 tensor: sqrt(4608) = 67.88 becomes 68.0.
        self.normalizer = torch.tensor(hidden ** 0.5, dtype=torch.bfloat16, device="cpu").item()

    def forward(self, input_ids):
        return self.embed_tokens(input_ids) * self.normalizer


def get_inputs(batch, seq, vocab):
    return [torch.randint(0, vocab, (batch, seq), dtype=torch.int64)]


def get_init_inputs(vocab, hidden):
    return [vocab, hidden]
