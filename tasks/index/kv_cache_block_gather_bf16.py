"""index_select of paged KV-cache blocks via a block table into contiguous per-sequence keys (vLLM paged KV)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["index_select", "paged-kv", "memory-bound"],
    # perf: one layer's K cache of Llama-3-8B (8 KV heads x 128) in 36864 blocks of 16 tokens
    # (1.2 GB); 32 sequences x 16384 tokens gathered (1.07 GB): ~0.7 ms at ~3 TB/s.
    "shapes": {
        "small": {"num_blocks": 64, "block_size": 4, "kv_heads": 2, "head_dim": 8,
                  "batch": 2, "blocks_per_seq": 8},
        "perf": {"num_blocks": 36864, "block_size": 16, "kv_heads": 8, "head_dim": 128,
                 "batch": 32, "blocks_per_seq": 1024},
    },
    "flops": "0",
    "bytes": "8 * batch * blocks_per_seq + 2 * 2 * batch * blocks_per_seq * block_size * kv_heads * head_dim",
    "tolerance": {"atol": 0, "rtol": 0},  # pure data movement: bit-exact
    "source": "vLLM paged KV cache gather for chunked prefill",
}


class Model(nn.Module):
    def forward(self, cache, block_table):
        batch, blocks_per_seq = block_table.shape
        _, block_size, kv_heads, head_dim = cache.shape
        gathered = cache.index_select(0, block_table.flatten())
        return gathered.view(batch, blocks_per_seq * block_size, kv_heads, head_dim)


def get_inputs(num_blocks, block_size, kv_heads, head_dim, batch, blocks_per_seq):
    cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=torch.bfloat16)
    # Each sequence owns distinct physical blocks, as the block allocator hands them out.
    table = torch.randperm(num_blocks, dtype=torch.int64)[: batch * blocks_per_seq]
    return [cache, table.view(batch, blocks_per_seq)]


def get_init_inputs():
    return []
