"""Token-embedding lookup into the 128256-entry Llama-3 vocabulary table (the first op of every Llama-3 forward)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["embedding", "gather", "memory-bound", "llama"],
    # perf: 32 sequences x 4096 tokens into the Llama-3-8B table (128256 x 4096, 1.05 GB);
    # 1.07 GB of rows read and written: ~0.7 ms at ~3 TB/s.
    "shapes": {
        "small": {"batch": 2, "seq": 32, "vocab": 1000, "hidden": 64},
        "perf": {"batch": 32, "seq": 4096, "vocab": 128256, "hidden": 4096},
    },
    "flops": "0",
    "bytes": "8 * batch * seq + 2 * 2 * batch * seq * hidden",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "Llama-3-8B token embedding",
}


class Model(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden, dtype=torch.bfloat16)

    def forward(self, input_ids):
        return self.embed_tokens(input_ids)


def get_inputs(batch, seq, vocab):
    return [torch.randint(0, vocab, (batch, seq), dtype=torch.int64)]


def get_init_inputs(vocab, hidden):
    return [vocab, hidden]
