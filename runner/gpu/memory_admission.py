"""When an evaluation may start on a GPU, by the device memory left: admission, and one more try.

With several evaluations in flight on one GPU (``executor.in_flight``) each holds its inputs and
outputs while it waits for its measurement's turn, 4-20 GiB for the suite's large tasks on the H100,
and a spare holds a CUDA context: with ``in_flight=8`` 14 of 222 reference evaluations ran out of
memory (BENCHMARKS.md, thirteenth session). The worker calls such an error ``infra_error`` /
``device_memory_taken`` (``runner/worker/memory.py``); here the orchestrator

- starts an evaluation only while the GPU has ``executor.admit_free_gib`` free (NVML), counting what
  the evaluations whose workers began their jobs in the last ``SETTLE_S`` seconds, or have not begun
  them yet, have not allocated yet (at a run's start the workers wait seconds for the fork server's
  imports: promises counted from the admission lapsed before anything was allocated, and seven of the
  first eight evaluations ran out of memory, 5 s of the run with no device work; BENCHMARKS.md,
  twenty-ninth session); one that would
  wait longer than ``WAIT_LIMIT_S`` starts anyway (recorded), and with none of the run's evaluations
  running on the GPU nothing waits, so a run always moves;
- runs an evaluation that ended ``device_memory_taken`` once more (``RETRY_REASON``), starting it once
  half the GPU is free or none of the run's others runs there. From when that second try asks until it
  ends, no other evaluation starts on the GPU: with 16 in flight on an H200, a second try that started
  with half the GPU free ran out again at its timing, the evaluations admitted after it holding 127 GiB
  (BENCHMARKS.md, forty-third session).

Each result keeps what its start waited for (``environment.memory_admission``). Read-only: NVML's
memory figures, never a setting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

from runner.gpu.nvml import device_memory

GIB = 1 << 30
# How long an admitted evaluation counts as not yet holding what it was admitted for once its worker has begun
# the job: it screens the candidate and makes its first inputs in about a second (H100, warm spares).
SETTLE_S = 3.0
# The longest a promise lasts, whether or not its worker has begun (one that never begins holds nothing).
PROMISE_LIMIT_S = 60.0
WAIT_LIMIT_S = 300.0
POLL_S = 0.1
# The verdict reason a second try answers (runner/worker/memory.py), and how much of the GPU that try waits for.
RETRY_REASON = "device_memory_taken"
RETRY_FREE_FRACTION = 0.5


@dataclass(eq=False)  # each promise is its own: removed by identity
class _Promise:
    """What an admitted evaluation will allocate: its size, when it was admitted, how to tell that its worker
    has begun the job, and when that was first seen (the admission, where there is no telling)."""

    size: int
    admitted_at: float
    began: Callable[[], bool] | None
    began_at: float | None = None

    def holds(self, now: float) -> bool:
        """Whether it still counts: not past the limit, and its worker not begun ``SETTLE_S`` ago or more."""
        if now - self.admitted_at >= PROMISE_LIMIT_S:
            return False
        if self.began_at is None and self.began():
            self.began_at = now
        return self.began_at is None or now - self.began_at < SETTLE_S


class MemoryAdmission:
    """One GPU's admissions: who runs, what was promised to the ones that have just started."""

    def __init__(self, index: int, free_needed_bytes: int, read=device_memory) -> None:
        self.index = index
        self.free_needed_bytes = free_needed_bytes
        self._read = read  # index -> (free, total) bytes, or None where NVML cannot say
        self._changed = threading.Condition()
        self._running = 0
        self._promised: list[_Promise] = []  # the running evaluations' that still count
        self._second_tries = 0  # asking or running: none other starts meanwhile
        self._second_tries_running = 0

    @contextmanager
    def admitted(
        self,
        free_needed_bytes: int | None = None,
        record: dict | None = None,
        began: Callable[[], bool] | None = None,
        second_try: bool = False,
    ):
        """Hold an evaluation's start until ``free_needed_bytes`` (default: the lane's) are free; it runs
        inside the block. ``record`` gets what the wait was and why it ended. ``began``: whether its worker
        has begun the job, from which its promise's ``SETTLE_S`` count (None: from the admission).
        ``second_try``: an evaluation that ran out of memory once: no other starts while it asks or runs, and it
        waits while another second try runs."""
        needed = self.free_needed_bytes if free_needed_bytes is None else free_needed_bytes
        record = {} if record is None else record
        started = time.monotonic()
        with self._changed:
            self._second_tries += second_try
            try:
                while True:
                    why = self._may_start(needed, time.monotonic() - started, second_try)
                    if why:
                        break
                    self._changed.wait(POLL_S)
            except BaseException:  # interrupted while asking: it holds nothing back any longer
                self._second_tries -= second_try
                self._changed.notify_all()
                raise
            self._running += 1
            self._second_tries_running += second_try
            now = time.monotonic()
            promise = _Promise(needed, now, began, None if began else now)
            self._promised.append(promise)
        record.update(needed_gib=round(needed / GIB, 2), waited_s=round(time.monotonic() - started, 3), started=why)
        try:
            yield record
        finally:
            with self._changed:
                self._running -= 1
                self._second_tries -= second_try
                self._second_tries_running -= second_try
                if promise in self._promised:
                    self._promised.remove(promise)  # an evaluation that ended allocates nothing more
                self._changed.notify_all()

    def _may_start(self, needed: int, waited: float, second_try: bool = False) -> str | None:
        """Why an evaluation may start now, or None to wait; called holding the condition's lock."""
        if self._second_tries_running if second_try else self._second_tries:
            return None  # a second try asks or runs: it starts before, and alone among second tries
        if self._running == 0:
            return "nothing else running"
        if waited >= WAIT_LIMIT_S:
            return f"waited the limit ({WAIT_LIMIT_S:.0f} s)"
        memory = self._read(self.index)
        if memory is None:
            return "no memory reading"
        free, _ = memory
        now = time.monotonic()
        self._promised = [promise for promise in self._promised if promise.holds(now)]
        promised = sum(promise.size for promise in self._promised)
        if free - promised >= needed:
            return f"{(free - promised) / GIB:.1f} GiB free"
        return None

    def retry_needs(self) -> int:
        """The free bytes a second try waits for: half the GPU (all that is left where NVML cannot say)."""
        memory = self._read(self.index)
        return int(memory[1] * RETRY_FREE_FRACTION) if memory else self.free_needed_bytes
