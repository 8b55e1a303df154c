"""A worker's device memory given back to the driver where no measurement runs, and held until the driver has
cleared it.

The driver clears the memory a process gives back (its allocator's ``empty_cache``, a context's reset, an exit)
on the GPU, after the call has returned, and while it does every kernel that streams memory runs slower. On an
H200 (driver 580), a 1 GiB copy of 0.51 ms ran 11.6% slower for about 100 ms after 40 GiB were given back, and for
about 20 ms after 8 GiB, whether this process gave them back or another one exited holding them (with its context
reset first or not); allocating 8 or 40 GiB, written or not, slowed nothing (BENCHMARKS.md, fifty-fourth session).
A worker that exits after letting go of the device's token gives back everything it held, most often inside the
next evaluation's turn (``context_exit.py``). With ``executor.release_under_token`` the worker gives its cached
blocks back while it still holds the token, and holds it ``SCRUB_S_PER_GIB`` per GiB given back longer: the next
measurement starts on a cleared GPU, and the worker's exit gives back only what its allocator could not (the
context's own memory, blocks still in use). Without it (the default) the checks' cache is given back as before, the
wait skipped, and the rest by the exit: over 40 reference evaluations on the H200 the wait (1.7 s) cost 1.2 points
of duty, and the disturbed batches (58-69 either way, their largest 20-37% slower: not this) and the repeatability
did not move beyond one pair's noise (BENCHMARKS.md, fifty-fourth session).

Read and released only; nothing here changes a setting of the device.
"""

from __future__ import annotations

import time

import torch

from runner.gpu.memory_admission import GIB

# How long the driver takes to clear what was given back, per GiB, with room: 40 GiB took about 100 ms and 8 GiB
# about 20 ms on the H200 (2.5 ms per GiB).
SCRUB_S_PER_GIB = 0.003


def settles(job: dict) -> bool:
    """Whether the job's worker waits, the token held, for the driver to clear what it gives back
    (``executor.release_under_token``; off where the job does not say)."""
    return bool(job.get("release_under_token", False))


def scrub_seconds(freed_bytes: int) -> float:
    """How long to wait after giving ``freed_bytes`` back before a measurement may run."""
    return max(0, freed_bytes) / GIB * SCRUB_S_PER_GIB


def release_device_memory(device: torch.device, stage: str, settle: bool = True) -> dict | None:
    """Give this process's cached device memory back (its queued work done first), then, with ``settle``, wait
    until the driver has cleared it: ``{"stage", "freed_bytes", "settle_s", "left_bytes"}``, None off a GPU or
    where CUDA never started. The caller holds the device's token, so no measurement runs meanwhile."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return None
    try:
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_reserved(device)
        torch.cuda.empty_cache()
        left = torch.cuda.memory_reserved(device)
    except RuntimeError as exc:  # a sticky error (the candidate's illegal address, say): the exit's reset clears it
        return {"stage": stage, "not_released": f"{type(exc).__name__}: {exc}"[:300]}
    freed = max(0, before - left)
    wait = scrub_seconds(freed) if settle else 0.0
    if wait > 0:
        time.sleep(wait)
    return {"stage": stage, "freed_bytes": freed, "settle_s": round(wait, 4), "left_bytes": left}
