"""When an evaluation may start on a GPU, by the device memory left: admission, and one more try.

With several evaluations in flight on one GPU (``executor.in_flight``) each holds its inputs and
outputs while it waits for its measurement's turn, 4-20 GiB for the suite's large tasks on the H100,
and a spare holds a CUDA context: with ``in_flight=8`` 14 of 222 reference evaluations ran out of
memory (BENCHMARKS.md, thirteenth session). The worker calls such an error ``infra_error`` /
``device_memory_taken`` (``runner/worker/memory.py``); here the orchestrator

- starts an evaluation only while the GPU has ``executor.admit_free_gib`` free (NVML), counting what
  the evaluations it started in the last ``SETTLE_S`` seconds have not allocated yet; one that would
  wait longer than ``WAIT_LIMIT_S`` starts anyway (recorded), and with none of the run's evaluations
  running on the GPU nothing waits, so a run always moves;
- runs an evaluation that ended ``device_memory_taken`` once more (``RETRY_REASON``), starting it once
  half the GPU is free or none of the run's others runs there.

Each result keeps what its start waited for (``environment.memory_admission``). Read-only: NVML's
memory figures, never a setting.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from runner.gpu.nvml import device_memory

GIB = 1 << 30
# How long an admitted evaluation counts as not yet holding what it was admitted for: its worker starts,
# screens the candidate and makes its first inputs in about a second (H100, warm spares).
SETTLE_S = 3.0
WAIT_LIMIT_S = 300.0
POLL_S = 0.1
# The verdict reason a second try answers (runner/worker/memory.py), and how much of the GPU that try waits for.
RETRY_REASON = "device_memory_taken"
RETRY_FREE_FRACTION = 0.5


class MemoryAdmission:
    """One GPU's admissions: who runs, what was promised to the ones that have just started."""

    def __init__(self, index: int, free_needed_bytes: int, read=device_memory) -> None:
        self.index = index
        self.free_needed_bytes = free_needed_bytes
        self._read = read  # index -> (free, total) bytes, or None where NVML cannot say
        self._changed = threading.Condition()
        self._running = 0
        self._promised: list[tuple[float, int]] = []  # (admitted at, bytes) of the last SETTLE_S seconds

    @contextmanager
    def admitted(self, free_needed_bytes: int | None = None, record: dict | None = None):
        """Hold an evaluation's start until ``free_needed_bytes`` (default: the lane's) are free; it runs
        inside the block. ``record`` gets what the wait was and why it ended."""
        needed = self.free_needed_bytes if free_needed_bytes is None else free_needed_bytes
        record = {} if record is None else record
        started = time.monotonic()
        with self._changed:
            while True:
                why = self._may_start(needed, time.monotonic() - started)
                if why:
                    break
                self._changed.wait(POLL_S)
            self._running += 1
            self._promised.append((time.monotonic(), needed))
        record.update(needed_gib=round(needed / GIB, 2), waited_s=round(time.monotonic() - started, 3), started=why)
        try:
            yield record
        finally:
            with self._changed:
                self._running -= 1
                self._changed.notify_all()

    def _may_start(self, needed: int, waited: float) -> str | None:
        """Why an evaluation may start now, or None to wait; called holding the condition's lock."""
        if self._running == 0:
            return "nothing else running"
        if waited >= WAIT_LIMIT_S:
            return f"waited the limit ({WAIT_LIMIT_S:.0f} s)"
        memory = self._read(self.index)
        if memory is None:
            return "no memory reading"
        free, _ = memory
        now = time.monotonic()
        self._promised = [(at, size) for at, size in self._promised if now - at < SETTLE_S]
        promised = sum(size for _, size in self._promised)
        if free - promised >= needed:
            return f"{(free - promised) / GIB:.1f} GiB free"
        return None

    def retry_needs(self) -> int:
        """The free bytes a second try waits for: half the GPU (all that is left where NVML cannot say)."""
        memory = self._read(self.index)
        return int(memory[1] * RETRY_FREE_FRACTION) if memory else self.free_needed_bytes
