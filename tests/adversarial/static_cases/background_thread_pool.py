# expect: integrity_violation static_thread_or_process
# Does the work in a background thread and returns before it is done.
from concurrent.futures import ThreadPoolExecutor

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


_POOL = ThreadPoolExecutor(max_workers=1)


class ModelNew(nn.Module):
    def forward(self, x):
        return _POOL.submit(_copy, x).result()
