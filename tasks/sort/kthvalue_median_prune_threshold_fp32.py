"""Per-row median (kthvalue, k = cols/2) of fp32 weight magnitudes with its int64 index, the per-output 50% magnitude-pruning threshold of an LLM weight."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "sort",
    "level": 1,
    "dtype": "float32",
    "tags": ["kthvalue", "selection", "median", "pruning", "llama"],
    # perf: |W| of Llama-3-70B's down_proj, 8192 output rows x 28672 inputs. Eager: one radix
    # select per row, ~4 passes over 940 MB -> ~1.5 ms on an H100; 1 GB of GPU memory.
    "shapes": {
        "small": {"rows": 16, "cols": 512},
        "perf": {"rows": 8192, "cols": 28672},
    },
    "flops": "4 * rows * cols",
    "bytes": "4 * rows * cols + (4 + 8) * rows",
    # The k-th value is one of the inputs, so a correct kernel returns it exactly; magnitudes are
    # ~0.02, far below the default atol 1e-4, which is tightened so that a bf16 copy fails.
    "tolerance": {"atol": 1e-6, "rtol": 1e-5},
    "source": "Unstructured 50% magnitude pruning per output row (Wanda/SparseGPT baseline): torch.kthvalue(|W|, cols // 2)",
}


class Model(nn.Module):
    def forward(self, magnitudes):
        values, indices = torch.kthvalue(magnitudes, magnitudes.shape[-1] // 2, dim=-1)
        return values, indices


def get_inputs(rows, cols):
    # Tie-free rows: column j gets the half-normal quantile of rank (a*j + b) mod p, distinct for
    # the prime p = 2^17 - 1 > cols (a < 2^13 keeps a*j + b inside int32); per-row weight scales.
    p = 131071
    a = torch.randint(1, 8192, (rows, 1), dtype=torch.int32)
    b = torch.randint(0, p, (rows, 1), dtype=torch.int32)
    rank = torch.arange(cols, dtype=torch.int32).mul(a).add_(b).remainder_(p)
    u = rank.to(torch.float32).add_(0.5).div_(p)
    scale = 2.0**0.5 * (0.01 + 0.02 * torch.rand(rows, 1, dtype=torch.float32))
    return [u.erfinv_().mul_(scale)]


def get_init_inputs():
    return []
