"""A measurement's turn kept clear of other CUDA contexts being made on its device, where one of its sides waits for
the device inside its calls (``executor.quiet_waiting_turns``).

Such a side (``timing.waits_for_device``: eager ``torch.linalg.solve``, ``cholesky``, an inverse that checks its
factors on the host) runs at the pace of its host thread between kernels, and another process making its CUDA context
on the same GPU slows that thread through the driver, though no kernel of it runs. In torch_compile's cold pass over
the suite on an H100, 21 of the 47 batches of such sides that ran beside a worker's or a compile warm-up's context
being made were over 10% slower than their side's lower quartile of batches, 12 of the 81 beside none; in the warm
pass 2 of 9 and 0 of 39. batched_solve_small_fp32's speedup was 1.037 in the cold pass (17 of its 52 batches over
10% slow, 11 of them beside a context) against 1.022 in the warm one, its batches beside no recorded event 1.027
(BENCHMARKS.md, seventy-sixth session). The other sides' batches were slowed so 6.9% and 6.5% of the time beside a
context, 1.0% and 0.8% beside none: their medians absorb that, and holding every context off every measurement
(``executor.spare_context_under_token``) cost 4 points of duty (thirteenth session), so only the turns whose host
sets the pace are kept clear.

The workers of a run make their contexts holding the device's context lock, one after another
(``device_token.one_context_at_a_time``; the compile warm-ups beside the sweep too). ``QuietTurn.hold`` takes that lock
for the rest of the turn, from the batch where a side is first known to wait, so no context is made while such a side
is sampled; the contexts asked for meanwhile are made once the turn lets it go. It waits at most ``WAIT_S`` for a
context being made to be done, then samples without it (a context takes 0.25-0.4 s; a turn is not held up longer for
one). The lock is an exclusive flock on a read-only descriptor, as the token's: the kernel drops it if the worker
dies. What it did goes into ``timing.quiet_turn``.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from runner.worker.device_token import open_context_lock

# The longest the turn waits for a context being made to be done before it samples without the lock.
WAIT_S = 1.0


class QuietTurn:
    """The device's context lock for one measurement's turn, taken once asked (``hold``) and let go by ``release``.
    ``token``: the device's token path (None: no token, nothing to hold; the record says so). ``record``: what
    happened, for ``timing.quiet_turn``: ``asked_at`` (epoch seconds), ``waited_s``, ``window`` ([start, end], the
    lock held) or ``not taken`` (why)."""

    def __init__(self, token: str | Path | None, wait_s: float = WAIT_S) -> None:
        self.token = token
        self.wait_s = wait_s
        self.record: dict = {}
        self._descriptor: int | None = None
        self._held = threading.Event()
        self._given_up = False
        self._state = threading.Lock()  # between ``hold`` giving up and the waiting thread getting the lock late

    @property
    def asked(self) -> bool:
        return "asked_at" in self.record

    def hold(self) -> bool:
        """Take the context lock, waiting at most ``wait_s`` for a context being made; whether it is held. Asked once:
        a second call only says whether the first one got it."""
        if self.asked:
            return self._held.is_set()  # never set once given up: the late thread lets the lock go instead
        self.record["asked_at"] = asked = time.time()
        self._descriptor = open_context_lock(self.token, self.record)
        if self._descriptor is None:
            return False
        try:
            fcntl.flock(self._descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self._held.set()
        except BlockingIOError:  # a context being made: wait for it in a thread, at most ``wait_s``
            threading.Thread(target=self._wait_for_lock, daemon=True, name="kbench-quiet-turn").start()
            self._held.wait(self.wait_s)
        with self._state:
            if not self._held.is_set():
                self._given_up = True  # the thread lets the lock go at once if it gets it later
                self.record["not taken"] = f"the context lock stayed held for {self.wait_s:g} s"
                self.record["waited_s"] = round(time.time() - asked, 6)
                return False
        now = time.time()
        self.record["waited_s"] = round(now - asked, 6)
        self.record["window"] = [now, None]
        return True

    def release(self) -> None:
        """Let the lock go (where held) and close the descriptor; the window's end is recorded. Safe to call twice,
        or where ``hold`` was never asked."""
        with self._state:
            descriptor, self._descriptor = self._descriptor, None
            if descriptor is None:
                return
            if self._given_up:
                # The waiting thread owns the descriptor now: it lets the lock go and closes it once it gets it.
                return
            if self._held.is_set():
                self.record["window"][1] = time.time()
                fcntl.flock(descriptor, fcntl.LOCK_UN)
            os.close(descriptor)

    def _wait_for_lock(self) -> None:
        descriptor = self._descriptor
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        with self._state:
            if not self._given_up:
                self._held.set()
                return
        fcntl.flock(descriptor, fcntl.LOCK_UN)  # too late for the turn
        os.close(descriptor)
