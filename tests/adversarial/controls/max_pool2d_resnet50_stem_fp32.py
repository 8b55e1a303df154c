"""Positive control: 3x3 max pooling, stride 2, padding 1 (NCHW), one Triton lane per output."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _max_pool_kernel(x_ptr, out_ptr, total, H, W, OH, OW, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < total
    ow = offsets % OW
    oh = (offsets // OW) % OH
    plane = offsets // (OW * OH)
    best = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for dy in tl.static_range(3):
        for dx in tl.static_range(3):
            ih = oh * 2 - 1 + dy
            iw = ow * 2 - 1 + dx
            inside = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            value = tl.load(x_ptr + (plane * H + ih) * W + iw, mask=inside, other=float("-inf"))
            best = tl.maximum(best, value)
    tl.store(out_ptr + offsets, best, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        batch, channels, height, width = x.shape
        out_h, out_w = (height - 1) // 2 + 1, (width - 1) // 2 + 1
        out = torch.empty((batch, channels, out_h, out_w), device=x.device, dtype=x.dtype)
        total = out.numel()
        _max_pool_kernel[(triton.cdiv(total, 256),)](x, out, total, height, width, out_h, out_w, BLOCK=256)
        return out
