"""How a worker's CUDA context ends: reset by the driver's API before the process exits, not torn down by the exit.

A process that exits holding a CUDA context stalls the whole GPU for every other context: on the H100 (driver
580), while one process measured batches of about 40 ms, each exit of another process (``os._exit``, a context with
0-4 GiB allocated) held its next batch's start back by 13-24 ms, four at once by up to 80 ms, and in a full suite
the exit of the evaluation that had just measured (about 0.2 s into the next one's turn) was in 2 s of the 4 s of
GPU idle around the batches. The same context reset first with ``cuDevicePrimaryCtxReset`` (0.25-0.27 s of the
exiting process's own time) and then exited stalled nothing: no gap over 0.2 ms in the batches beside it
(BENCHMARKS.md, thirtieth session). Nor does the token help to place the exit: a flock held across ``os._exit``
is let go at once, a fifth of a second before the stall.

``reset_cuda_context`` is the last device call of a worker, after its result is on disk. Where the driver cannot
reset the context it says why (``ContextNotReset``): the worker notes that in its stderr log and exits, which tears
the context down as before. On a CPU, or where CUDA was never initialised, there is nothing to reset.
"""

from __future__ import annotations

import ctypes
import time

import torch


class ContextNotReset(RuntimeError):
    """The driver could not be reached or refused the reset; the exit will tear the context down instead."""


def reset_cuda_context() -> float | None:
    """Reset this process's primary CUDA context, if it made one: the seconds that took, None where it made none.
    Nothing of the device may be used afterwards: the caller exits."""
    if not torch.cuda.is_initialized():
        return None
    started = time.perf_counter()
    try:
        ordinal = torch.cuda.current_device()
    except RuntimeError as exc:
        raise ContextNotReset(f"the current device is not known: {exc}"[:300]) from None
    try:
        torch.cuda.synchronize()  # what is queued finishes first
        # The cached blocks back to the driver at once (a few ms for GiBs, no stall beside it on the H100), so the
        # memory admission sees them free before the reset's quarter of a second is over.
        torch.cuda.empty_cache()
    except RuntimeError:  # a sticky error (an illegal address, say): the reset clears it all the same
        pass
    try:
        driver = ctypes.CDLL("libcuda.so.1")  # loaded already (torch's context): no second copy
    except OSError as exc:
        raise ContextNotReset(f"the driver library: {exc}") from None
    device = ctypes.c_int()
    status = driver.cuDeviceGet(ctypes.byref(device), ordinal)
    if status != 0:
        raise ContextNotReset(f"cuDeviceGet({ordinal}) returned CUDA error {status}")
    status = driver.cuDevicePrimaryCtxReset(device)
    if status != 0:
        raise ContextNotReset(f"cuDevicePrimaryCtxReset returned CUDA error {status}")
    return time.perf_counter() - started
