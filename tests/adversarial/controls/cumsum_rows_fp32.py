"""Positive control: row-wise inclusive prefix sum, block scans chained by a running carry."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_rows_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row_start = tl.program_id(0) * n_cols
    carry = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row_start + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row_start + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def forward(self, probs):
        x = probs.contiguous()
        out = torch.empty_like(x)
        n_cols = x.shape[-1]
        _cumsum_rows_kernel[(x.numel() // n_cols,)](x, out, n_cols, BLOCK=1024)
        return out
