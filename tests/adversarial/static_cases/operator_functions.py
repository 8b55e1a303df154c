# expect: integrity_violation static_torch_compute
# The linear layer through the operator module's functions (operator.matmul is x @ w), then a
# copy through its own kernel so that a kernel of its own does run. Found while writing the
# kernel census's corpus: the screen used to read these as plain function calls.
import operator

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
        y = operator.add(operator.matmul(x, self.linear.weight.T), self.linear.bias)
        return _copy(operator.mul(y, operator.gt(y, 0.0)))
