# expect: integrity_violation static_torch_compute
# Launches a kernel of its own, then does the real work through PyTorch functions kept in a
# table at module scope, so that forward's text names no torch function.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def _copy(x):
    out = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


_OPS = {"mm": torch.matmul, "act": torch.relu}


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _OPS["act"](_OPS["mm"](_copy(a), b))
