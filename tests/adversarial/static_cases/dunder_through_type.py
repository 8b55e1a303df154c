# expect: integrity_violation static_torch_compute
# Tensor arithmetic through the dunder methods of the tensor's type, which looks like an
# attribute call on something that is not a tensor.
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


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        y = type(x).__add__(type(x).__matmul__(x, self.linear.weight.T), self.linear.bias)
        return _copy(y.__class__.__mul__(y, y > 0))
