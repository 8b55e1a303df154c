"""Positive control: Gemma RMSNorm ``x / rms(x) * (1 + w)``, one Triton program per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row_start = tl.program_id(0) * n_cols
    squares = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row_start + cols, mask=cols < n_cols, other=0.0)
        squares += x * x
    inv_rms = tl.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row_start + cols, mask=mask)
        w = tl.load(w_ptr + cols, mask=mask)
        tl.store(out_ptr + row_start + cols, x * inv_rms * (1.0 + w), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        # Same construction as the reference, so the seeded initialisation matches.
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 0.0, 0.5)
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        _rms_norm_kernel[(x.numel() // n_cols,)](x, self.weight, out, n_cols, self.eps, BLOCK=1024)
        return out
