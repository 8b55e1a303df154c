"""Positive control: per-token smooth-L1 loss summed over features, scaled by 1/sqrt(dim), in Triton."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _smooth_l1_rows_kernel(pred_ptr, target_ptr, out_ptr, n_cols, beta, scale, BLOCK: tl.constexpr):
    row_start = tl.program_id(0) * n_cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        diff = tl.abs(
            tl.load(pred_ptr + row_start + cols, mask=mask, other=0.0)
            - tl.load(target_ptr + row_start + cols, mask=mask, other=0.0)
        )
        loss = tl.where(diff < beta, 0.5 * diff * diff / beta, diff - 0.5 * beta)
        acc += tl.where(mask, loss, 0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0) * scale)


class ModelNew(nn.Module):
    def __init__(self, beta=0.25):
        super().__init__()
        self.beta = beta

    def forward(self, pred, target):
        pred, target = pred.contiguous(), target.contiguous()
        n_cols = pred.shape[-1]
        out = torch.empty(pred.shape[:-1], device=pred.device, dtype=pred.dtype)
        _smooth_l1_rows_kernel[(pred.numel() // n_cols,)](
            pred, target, out, n_cols, self.beta, n_cols**-0.5, BLOCK=1024
        )
        return out
