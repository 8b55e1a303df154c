"""int8 x int8 GEMM, int32-exact accumulation, per-token x per-channel scales to fp32 (SmoothQuant W8A8 linear)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "float32",  # the output dtype: the GEMM itself is int8 x int8 -> int32
    "tags": ["gemm", "int8", "w8a8", "dequantize"],
    # perf: a 2048-token prefill chunk through a Llama-3-8B up_proj (4096 -> 14336). The
    # reference runs the exact product in fp64 (240 GFLOP, ~5 ms on H100 fp64 tensor cores);
    # an int8 tensor-core kernel needs ~0.5 ms.
    "shapes": {
        "small": {"tokens": 32, "d_in": 128, "d_out": 64},
        "perf": {"tokens": 2048, "d_in": 4096, "d_out": 14336},
    },
    "flops": "2 * tokens * d_in * d_out",
    "bytes": "tokens * d_in + d_out * d_in + 4 * (tokens + d_out) + 4 * tokens * d_out",
    # Numerics contract: acc = sum_k a[t, k] * w[n, k] exactly, as an int32 accumulator
    # would hold it (|acc| <= d_in * 127**2 < 2**31; fp64 holds every partial sum exactly,
    # so the reference is exact on CPU and GPU alike), then out = fp32(acc) * a_scale[t] *
    # w_scale[n] in fp32. rtol 1e-4 absorbs the order of the two scale products.
    "tolerance": {"atol": 1e-4, "rtol": 1e-4},
    "source": "SmoothQuant W8A8 linear (per-token activation, per-channel weight scales)",
}


class Model(nn.Module):
    def forward(self, a_q, w_q, a_scale, w_scale):
        acc = a_q.to(torch.float64) @ w_q.to(torch.float64).t()
        return acc.to(torch.float32) * a_scale * w_scale


def get_inputs(tokens, d_in, d_out):
    a_q = torch.randint(-127, 128, (tokens, d_in), dtype=torch.int8)
    w_q = torch.randint(-127, 128, (d_out, d_in), dtype=torch.int8)
    a_scale = torch.rand(tokens, 1, dtype=torch.float32) * 0.02 + 0.01
    w_scale = torch.rand(1, d_out, dtype=torch.float32) * 5e-4 + 2.5e-4
    return [a_q, w_q, a_scale, w_scale]


def get_init_inputs():
    return []
