# expect: integrity_violation no_own_kernel_ran
# Defines an honest Triton kernel but launches it only for a million rows or more, a path the
# checked shapes never take; below that it computes through ``operator.matmul``/``operator.add``,
# which the static screen reads as plain function calls. It passes the screen under own_kernels
# and its values are right: only the kernel census sees that no kernel of its own ran.
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, F: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, F)
    x = tl.load(x_ptr + row * F + cols)
    w = tl.load(w_ptr + cols[:, None] * F + cols[None, :])
    y = tl.sum(w * x[None, :], axis=1) + tl.load(b_ptr + cols)
    tl.store(out_ptr + row * F + cols, tl.maximum(y, 0.0))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        if x.shape[0] >= 1 << 20:
            out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
            _linear_relu_kernel[(x.shape[0],)](x, self.linear.weight, self.linear.bias, out, F=x.shape[1])
            return out
        y = operator.add(operator.matmul(x, self.linear.weight.T), self.linear.bias)
        return operator.mul(y, operator.gt(y, 0.0))
