# expect: integrity_violation static_introspection
# Launches its own kernel only while a profiler watches (the kernel census profiles one checked
# call); every other call, timed ones included, hands the work to cuBLAS. It asks the profiler
# through torch's private flag, so no PyTorch compute appears among its own calls on that path.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features))

    def forward(self, x):
        if torch.autograd._profiler_enabled():
            out = torch.empty_like(x)
            _relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
            return out
        return getattr(x, "__ma" + "tmul__")(self.weight).clamp_min(0.0)
