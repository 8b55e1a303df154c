"""Decode-step GQA attention over a paged KV cache: gather each sequence's blocks through its block table, mask past its length, softmax, P@V (vLLM PagedAttention)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "attention",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["attention", "decode", "paged_kv", "gqa", "gather", "memory_bound", "llama"],
    # perf: Llama-3-8B decode (32 query / 8 KV heads x 128), 32 sequences of up to 4096 tokens in
    # blocks of 16, from a 10240-block cache (671 MB of K and V). Eager gathers 537 MB of K/V and
    # makes fp32/permuted copies (~3.5 GB moved): ~1.2 ms on an H100, ~2.5 GB of memory.
    "shapes": {
        "small": {"batch": 2, "q_heads": 4, "kv_heads": 2, "head_dim": 16,
                  "num_blocks": 16, "block_size": 4, "blocks_per_seq": 6},
        "perf": {"batch": 32, "q_heads": 32, "kv_heads": 8, "head_dim": 128,
                 "num_blocks": 10240, "block_size": 16, "blocks_per_seq": 256},
    },
    # Sequence lengths are uniform in [1, blocks_per_seq * block_size]: a kernel that stops at
    # each sequence's length touches half the table's tokens on average.
    "flops": "4 * batch * q_heads * (blocks_per_seq * block_size // 2) * head_dim",
    "bytes": (
        "2 * 2 * batch * (blocks_per_seq * block_size // 2) * kv_heads * head_dim"
        " + 4 * batch * blocks_per_seq + 4 * batch + 2 * 2 * batch * q_heads * head_dim"
    ),
    # rtol 2e-2: the output is bf16, and one bf16 ulp at |x| in [2, 4) (0.0156) is half the
    # default bound there; a kernel keeping fp32 probabilities differs from this reference
    # (bf16 P before P@V) by one ulp on some outputs.
    "tolerance": {"atol": 1e-2, "rtol": 2e-2},
    "source": "vLLM paged_attention_v1 semantics (key/value cache [num_blocks, block_size, kv_heads, head_dim])",
}


class Model(nn.Module):
    def forward(self, q, k_cache, v_cache, block_table, seq_lens):
        batch, q_heads, head_dim = q.shape
        _, block_size, kv_heads, _ = k_cache.shape
        k = k_cache[block_table].view(batch, -1, kv_heads, head_dim)  # [batch, ctx, kv_heads, d]
        v = v_cache[block_table].view(batch, -1, kv_heads, head_dim)
        # The q heads that share a KV head form one group: query head h reads KV head h // group.
        qg = q.view(batch, kv_heads, q_heads // kv_heads, head_dim).float() * head_dim ** -0.5
        s = torch.einsum("bhgd,bthd->bhgt", qg, k.float())
        past_end = torch.arange(k.shape[1], device=q.device) >= seq_lens[:, None].long()
        s = s.masked_fill(past_end[:, None, None, :], float("-inf"))
        p = torch.softmax(s, dim=-1).to(q.dtype)
        return torch.einsum("bhgt,bthd->bhgd", p, v).reshape(batch, q_heads, head_dim)


def get_inputs(batch, q_heads, kv_heads, head_dim, num_blocks, block_size, blocks_per_seq):
    # q is scaled so that the scores have std ~2 (as in trained models): attention is not uniform.
    q = torch.randn(batch, q_heads, head_dim, dtype=torch.bfloat16) * 2
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=torch.bfloat16)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, dtype=torch.bfloat16)
    # Each sequence owns distinct physical blocks, as the block allocator hands them out (int32 as in vLLM).
    table = torch.randperm(num_blocks)[: batch * blocks_per_seq].to(torch.int32).view(batch, blocks_per_seq)
    seq_lens = torch.randint(1, blocks_per_seq * block_size + 1, (batch,), dtype=torch.int32)
    return [q, k_cache, v_cache, table, seq_lens]


def get_init_inputs():
    return []
