"""Per-token int8 dequantization of a KV cache to bf16 before attention (int8 KV-cache serving)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 1,
    "dtype": "bfloat16",
    "tags": ["dequantize", "int8", "per-token", "kv-cache"],
    # perf: Llama-3-8B K cache (8 KV heads x 128) of 32 sequences x 8192 tokens, 268 MB int8;
    # eagerly ~5 GB moved through fp32 temporaries: ~2 ms.
    "shapes": {
        "small": {"batch": 2, "kv_heads": 2, "seq": 64, "head_dim": 32},
        "perf": {"batch": 32, "kv_heads": 8, "seq": 8192, "head_dim": 128},
    },
    "flops": "batch * kv_heads * seq * head_dim",
    "bytes": "batch * kv_heads * seq * (3 * head_dim + 4)",
    # Numerics contract: out = bf16(fp32(q) * scale), one rounding to bf16. A kernel that
    # multiplies in bf16 is within 2 bf16 ulps (< 0.8%) and passes rtol 1e-2.
    "tolerance": {"atol": 1e-2, "rtol": 1e-2},
    "source": "int8 KV cache with per-token scales (vLLM/TensorRT-LLM int8 KV)",
}


class Model(nn.Module):
    def forward(self, q, scale):
        return (q.to(torch.float32) * scale).to(torch.bfloat16)


def get_inputs(batch, kv_heads, seq, head_dim):
    q = torch.randint(-127, 128, (batch, kv_heads, seq, head_dim), dtype=torch.int8)
    scale = torch.rand(batch, kv_heads, seq, 1, dtype=torch.float32) * 0.03 + 0.005
    return [q, scale]


def get_init_inputs():
    return []
