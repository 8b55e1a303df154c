"""A few device values a check needs on the host, fetched without waiting for them.

Every read from the device (``tolist``, ``item``) waits for the work queued before it; with several evaluations
in flight on one GPU that wait includes the GPU's time slice among their contexts (about 1.1 ms beside seven,
against 77 µs alone: BENCHMARKS.md, nineteenth session), and a cohort's gap between two measurements is made
of its members' chains of such waits (twenty-seventh session). Where a verdict can wait until the worker
synchronises anyway (the correctness loop's synchronisation before the next trial's call), ``Later`` queues a
copy of the values into pinned host memory behind the kernels that computed them and reads it when asked: by
then the device has passed it, and the read waits for nothing. A read asked for earlier waits for that copy
(a CUDA event), never for later work, so it is always right. On a CPU the values are there at once.
"""

from __future__ import annotations

import torch


class Later:
    """The values of ``tensor``, copied to the host behind the work queued so far; ``tolist`` reads them."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self._event = None
        if not tensor.is_cuda:
            self._host = tensor
            return
        # Pinned, so the copy is asynchronous (from a kernel's results, not a read the host waits for); torch's
        # host allocator keeps the block until the copy is done, whatever happens to this object.
        self._host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
        self._host.copy_(tensor, non_blocking=True)
        self._event = torch.cuda.Event()
        self._event.record()

    def tolist(self) -> list:
        if self._event is not None:
            self._event.synchronize()  # at once where the device has passed it
        return self._host.tolist()
