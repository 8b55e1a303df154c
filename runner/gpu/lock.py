"""Per-device locks: one flock per GPU UUID (or per host for CPU timing).

Held for the whole evaluation, so two kbench processes on one machine never measure on the
same device at once. The kernel releases a flock when its holder dies. A waiting process
says whom it waits for (the holder writes its pid and run next to the lock).
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


def lock_dir() -> Path:
    return Path(os.environ.get("KBENCH_LOCK_DIR", Path(tempfile.gettempdir()) / "kbench-locks"))


@contextmanager
def device_lock(device_key: str, run_label: str, on_wait=None, poll_s: float = 1.0):
    """Hold the lock for ``device_key``; ``on_wait(holder_info)`` is called while waiting."""
    directory = lock_dir()
    directory.mkdir(parents=True, exist_ok=True)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in device_key)
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
