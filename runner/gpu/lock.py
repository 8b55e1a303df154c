"""Per-device locks: one flock per GPU UUID (or per host for CPU timing).

A run holds the lock of each of its devices while it evaluates on it, so two kbench processes
on one machine never measure on the same device at once. The kernel releases a flock when its
holder dies. A waiting process says whom it waits for (the holder writes its pid and run next
to the lock). Inside a run, the device-work token (``work_token``) orders the device work of
the evaluations in flight (shared for computing and checking, exclusive for measuring).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from runner.worker.device_token import create_token_files


def lock_dir() -> Path:
    return Path(os.environ.get("KBENCH_LOCK_DIR", Path(tempfile.gettempdir()) / "kbench-locks"))


def device_key(gpu: str | None) -> str:
    """The lock name of a device: its UUID (or index where NVML cannot say), or the host for CPU runs."""
    return f"gpu-{gpu}" if gpu is not None else "cpu-host"


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)


def work_token(gpu: str | None) -> Path:
    """The device-work token of ``gpu`` (``runner/worker/device_token.py``) and its turnstile, readable by all.

    The run's lock (``device_lock``) keeps other kbench processes off the device for the whole
    run; the token orders the device work of the run's own evaluations in flight.
    """
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return create_token_files(directory / f"{_safe(device_key(gpu))}.work")


@contextmanager
def device_lock(device_key: str, run_label: str, on_wait=None, poll_s: float = 1.0):
    """Hold the lock for ``device_key``; ``on_wait(holder_info)`` is called while waiting."""
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    safe = _safe(device_key)
    lock = FileLock(str(directory / f"{safe}.lock"))
    holder_file = directory / f"{safe}.holder"
    while True:
        try:
            lock.acquire(timeout=poll_s)
            break
        except Timeout:
            if on_wait is not None:
                on_wait(_read_holder(holder_file))
    try:
        holder_file.write_text(
            json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "run": run_label, "since": time.time()})
        )
        yield
    finally:
        lock.release()


def _read_holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
