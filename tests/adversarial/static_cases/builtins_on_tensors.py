# expect: integrity_violation static_torch_compute
# Python's builtins on tensors: sum() adds them and max() compares them, each with torch.
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
        # Twice the input, floored at the input: sum() and max() do it with torch.
        return _copy(max(sum([x, x]), x))
