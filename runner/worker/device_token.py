"""The device-work token: one flock per device that every phase touching the device holds.

Several evaluations of a run may be in flight on one GPU (``executor.in_flight``): their
process start, imports, static screen and result writing overlap, but anything that runs
device work (the reference, the candidate's import and calls, timing, the checks after it)
holds this token, so no two evaluations ever run work on the GPU at the same time and a
measurement never shares the device. The compile warm-up holds it from the orchestrator.

A flock taken on a read-only descriptor: the token file can be mounted read-only into a
container (the host kernel arbitrates, the same as on the host). The kernel drops it when its
holder dies. Standard library only: the worker image has no filelock.
"""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

# The environment variable through which executors hand each sandbox its device's token.
TOKEN_ENV = "KBENCH_DEVICE_TOKEN"


@contextmanager
def device_token(path: str | Path | None, record: dict | None = None):
    """Hold the token at ``path`` (none: nothing to hold); ``record`` gets the wait and the hold window."""
    if not path:
        yield
        return
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    asked = time.time()
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        held_from = time.time()
        if record is not None:
            record.update(path=str(path), waited_s=round(held_from - asked, 6), held=[held_from, None])
        try:
            yield
        finally:
            if record is not None:
                record["held"][1] = time.time()
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)
