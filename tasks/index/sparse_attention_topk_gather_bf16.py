"""torch.gather of the top-k selected key positions per KV head, as in token-sparse long-context decode attention."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["gather", "sparse-attention", "decode", "memory-bound"],
    # perf: 32 sequences of 32768 cached tokens, Llama-3-8B KV layout (8 heads x 128, 2.1 GB
    # of keys), 8192 positions kept per head (Quest-style top-k): 537 MB gathered, ~0.9 ms.
    "shapes": {
        "small": {"batch": 2, "kv_heads": 2, "seq": 64, "head_dim": 16, "topk": 16},
        "perf": {"batch": 32, "kv_heads": 8, "seq": 32768, "head_dim": 128, "topk": 8192},
    },
    "flops": "0",
    "bytes": "8 * batch * kv_heads * topk + 2 * 2 * batch * kv_heads * topk * head_dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "top-k KV selection in sparse decode attention (Quest, DeepSeek sparse attention)",
}


class Model(nn.Module):
    def forward(self, keys, topk_idx):
        index = topk_idx.unsqueeze(-1).expand(-1, -1, -1, keys.shape[-1])
        return torch.gather(keys, 2, index)


def get_inputs(batch, kv_heads, seq, head_dim, topk):
    keys = torch.randn(batch, kv_heads, seq, head_dim, dtype=torch.bfloat16)
    # Distinct positions per (sequence, head), in score order as a top-k returns them.
    topk_idx = torch.rand(batch, kv_heads, seq, dtype=torch.float32).argsort(dim=-1)[..., :topk]
    return [keys, topk_idx]


def get_init_inputs():
    return []
