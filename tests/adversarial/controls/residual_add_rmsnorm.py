"""Positive control: fused residual add + RMSNorm returning (normed, new residual), one program per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row_start = tl.program_id(0) * n_cols
    squares = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        h = tl.load(x_ptr + row_start + cols, mask=mask, other=0.0) + tl.load(
            res_ptr + row_start + cols, mask=mask, other=0.0
        )
        tl.store(res_out_ptr + row_start + cols, h, mask=mask)
        squares += h * h
    inv_rms = tl.rsqrt(tl.sum(squares, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        # Recomputed rather than read back: another lane of this program may have stored it.
        h = tl.load(x_ptr + row_start + cols, mask=mask) + tl.load(res_ptr + row_start + cols, mask=mask)
        w = tl.load(w_ptr + cols, mask=mask)
        tl.store(out_ptr + row_start + cols, h * inv_rms * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        # Same construction as the reference, so the seeded initialisation matches.
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.float32))
        nn.init.normal_(self.weight, 1.0, 0.1)
        self.eps = eps

    def forward(self, x, residual):
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        new_residual = torch.empty_like(x)
        n_cols = x.shape[-1]
        grid = (x.numel() // n_cols,)
        _add_rms_norm_kernel[grid](x, residual, self.weight, out, new_residual, n_cols, self.eps, BLOCK=1024)
        return out, new_residual
