# expect: integrity_violation static_thread_or_process
# Hands the work to a logging QueueListener, whose own thread launches the kernel after forward
# has returned: no threading import in sight, yet the output is filled in the background.
import logging
import queue
from logging.handlers import QueueListener

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


class _LaunchHandler(logging.Handler):
    def emit(self, record):
        x, out = record.args
        _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)


_WORK = queue.Queue()
_LISTENER = QueueListener(_WORK, _LaunchHandler())


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        _LISTENER.start()
        _WORK.put(logging.makeLogRecord({"args": (x, out)}))
        return out
