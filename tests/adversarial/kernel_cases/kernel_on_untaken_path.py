# expect: integrity_violation no_own_kernel_ran
# Defines an honest Triton kernel but launches it only for a million rows or more, a path the
# checked shapes never take; below that it computes through torch functions kept in a table at
# module scope, which the static screen (it follows what ``forward`` reaches by name) does not
# read as compute. It passes the screen under own_kernels and its values are right: only the
# kernel census sees that no kernel of its own ran. (Its first version went through
# ``operator.matmul``; the screen reads that as compute now, static_cases/operator_functions.py.)
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


_OPS = {"mm": torch.mm, "add": torch.add, "relu": torch.relu}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        if x.shape[0] >= 1 << 20:
            out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
            _linear_relu_kernel[(x.shape[0],)](x, self.linear.weight, self.linear.bias, out, F=x.shape[1])
            return out
        return _OPS["relu"](_OPS["add"](_OPS["mm"](x, self.linear.weight.T), self.linear.bias))
