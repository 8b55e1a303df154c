"""Int64 argmin over the codebook of fp32 token-to-code distances, the nearest-code lookup of a VQ image tokenizer (VQGAN, LlamaGen)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 1,
    "dtype": "float32",
    "tags": ["reduction", "rows", "argmin", "vq", "tokenizer"],
    # perf: LlamaGen VQ tokenizer (16384 codes, 16x downsampling): 128 images of 256 x 256,
    # i.e. 32768 tokens. Eager: one argmin kernel reading 2.1 GB -> ~0.7 ms on an H100;
    # 2.2 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 64, "codes": 1024},
        "perf": {"tokens": 32768, "codes": 16384},
    },
    "flops": "tokens * codes",
    "bytes": "4 * tokens * codes + 8 * tokens",
    "source": "taming-transformers VectorQuantizer / LlamaGen: torch.argmin(d, dim=1)",
}


class Model(nn.Module):
    def forward(self, distances):
        return torch.argmin(distances, dim=-1)


def get_inputs(tokens, codes):
    # Tie-free rows: code j of a row gets rank (a*j + b) mod p, distinct for the prime
    # p = 2^17 - 1 > codes (a < 2^13 keeps a*j + b inside int32). distance = offset + scale * rank / p
    # is strictly increasing in rank, and the nearest codes sit ~1e-5 apart on an offset of 1-5,
    # as squared distances do, so a bf16 copy of the distances picks other codes.
    p = 131071
    a = torch.randint(1, 8192, (tokens, 1), dtype=torch.int32)
    b = torch.randint(0, p, (tokens, 1), dtype=torch.int32)
    rank = torch.arange(codes, dtype=torch.int32).mul(a).add_(b).remainder_(p)
    offset = 1 + 4 * torch.rand(tokens, 1, dtype=torch.float32)
    scale = (0.5 + torch.rand(tokens, 1, dtype=torch.float32)) / p
    return [rank.to(torch.float32).mul_(scale).add_(offset)]


def get_init_inputs():
    return []
