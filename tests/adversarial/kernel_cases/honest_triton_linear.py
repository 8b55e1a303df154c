# expect: correct
# Positive control: the same kernel, launched on every call; the census must show it as the
# candidate's own.
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
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        _linear_relu_kernel[(x.shape[0],)](x, self.linear.weight, self.linear.bias, out, F=x.shape[1])
        return out
