"""Stable descending sort of each row of vocabulary logits with indices: the sort step of top-p (nucleus) sampling."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["sort", "sampling", "llama"],
    # perf: vLLM's default max_num_seqs=256 decode batch over the Llama-3 vocabulary (128256).
    "shapes": {
        "small": {"batch": 4, "vocab": 1000},
        "perf": {"batch": 256, "vocab": 128256},
    },
    "flops": "batch * vocab * log2(vocab)",
    "bytes": "4 * batch * vocab + (4 + 8) * batch * vocab",
    "source": "top-p sampling: torch.sort(logits, descending=True) (HF TopPLogitsWarper, vLLM sampler)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        # randn rows of 128k fp32 values hold ~100 exactly tied pairs each, so the order of
        # tied values is fixed by a stable sort: ties keep ascending index order.
        values, indices = torch.sort(logits, dim=-1, descending=True, stable=True)
        return values, indices


def get_inputs(batch, vocab):
    return [torch.randn(batch, vocab, dtype=torch.float32)]


def get_init_inputs():
    return []
