"""The device-work token: a reader-writer lock per device, exclusive for measurement.

Several evaluations of a run may be in flight on one GPU (``executor.in_flight``): their
process start, imports, static screen and result writing overlap freely. Device work that
measures nothing (the reference outputs, the candidate's import and correctness calls, the
checks after timing) holds the token **shared**, so evaluations in flight run those phases
side by side; the timed samples hold it **exclusive**, so a measurement never shares the GPU
with anything of the run. A turnstile (a second flock, taken briefly before the token) keeps a
waiting measurement from being starved by a stream of shared holders, and a third, the ready gate,
keeps a newcomer's first shared phases from cutting in between measurements that are ready: from
``approach`` until its turn a measurement holds the gate shared, and a fresh shared holder passes the
gate (exclusive, let go at once) only once no measurement is ready, so newcomers gather and run
together when the queue of ready measurements is empty (the lane would be idle then anyway) instead of
one by one in between turns (f34: 27 of 68 gaps held a single newcomer's first shared phases, 0.42 s
each, while measurements were ready; BENCHMARKS.md, nineteenth session). A measurement's warm-up
runs while it queues (``approach``): turnstile taken, token shared, beside the shared work already
in (often the last measurement's checks after timing), so the turn starts with the samples. The
compile warm-up ahead of the sweep holds the token from the orchestrator; a compile warm-up beside the
sweep holds it shared in short windows that **cut in** (``cuts_in``): past the ready gate and the
turnstile, waiting only for the measurement in its turn, so they join the shared work of the moment
(the next measurement's approach) rather than each wait for the queue of ready measurements to run dry
(H200, torch_compile's whole suite: 4,086 of the warm-ups' 5,130 s went to that wait, their device
windows 107 s; BENCHMARKS.md, thirty-sixth session). The measurement that asks for its turn meanwhile
waits for them as for any shared holder that was in before it. ``cuts_in`` may instead be a question
asked while the window waits (``TOLD_POLL_S``): until it says yes the window waits at the ready gate as a
newcomer does, so it joins a cohort's gap, where the lane measures nothing anyway, rather than lengthen a
hand-over; once it says yes (the sweep needs this warm-up soon: ``runner/warmup_beside.py``) it cuts in.

How far a measurement is isolated is the run's choice (``executor.measurement_isolation``):
- ``device`` (the default): as above; nothing of the run runs device work beside a measurement.
- ``measurements``: only measurements (and the compile warm-up) exclude each other; shared
  holders take no lock, so other evaluations' reference outputs, correctness calls and checks
  run during a measurement. Their kernels can land inside a sample (on one GPU, contexts are
  time-sliced), which the interleaved order spreads over both sides and the median absorbs;
  what it costs in repeatability is measured, not assumed (BENCHMARKS.md).

A fourth file, the context lock, is not the token's: a worker holds it while it makes its CUDA context, so the
device's workers make theirs one after another and the first has its own soonest (``one_context_at_a_time``).

All are flocks taken on read-only descriptors: the files can be mounted read-only into a
container (the host kernel arbitrates, the same as on the host). The kernel drops them when
their holder dies. Every window the token was held (start, end, mode) goes into the record the
caller passes, which the result keeps (``environment.device_token``). Standard library only:
the worker image has no filelock.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

# The environment variable through which executors hand each sandbox its device's token.
TOKEN_ENV = "KBENCH_DEVICE_TOKEN"
# Set for a worker on a GPU: it makes its CUDA context before its job, "1" at once, PREINIT_UNDER_TOKEN
# holding the token shared (never while a measurement runs).
PREINIT_ENV = "KBENCH_CUDA_PREINIT"
PREINIT_UNDER_TOKEN = "token"

SHARED = "shared"
EXCLUSIVE = "exclusive"

# How often a shared window that cuts in only once told (``DeviceToken(cuts_in=<question>)``) asks again while
# it waits at the ready gate.
TOLD_POLL_S = 0.02

# The stage a worker marks while it waits for the exclusive token: executors do not count it
# against the evaluation's time limit (the other evaluations' measurements are not its time).
WAIT_STAGE = "waiting_for_device"

# executor.measurement_isolation: what a measurement excludes.
ISOLATE_DEVICE = "device"
ISOLATE_MEASUREMENTS = "measurements"
ISOLATIONS = (ISOLATE_DEVICE, ISOLATE_MEASUREMENTS)


def turnstile_of(token: str | Path) -> Path:
    """The turnstile file that goes with the token file ``token``."""
    return Path(f"{token}.turnstile")


def ready_gate_of(token: str | Path) -> Path:
    """The ready gate's file that goes with the token file ``token``."""
    return Path(f"{token}.ready")


def context_lock_of(token: str | Path) -> Path:
    """The file whose lock a worker holds while it makes its CUDA context (``one_context_at_a_time``)."""
    return Path(f"{token}.context")


def token_files(token: str | Path) -> tuple[Path, Path, Path, Path]:
    """The token's files: the token, its turnstile, its ready gate and the context lock (all mounted into a
    container)."""
    return Path(token), turnstile_of(token), ready_gate_of(token), context_lock_of(token)


def create_token_files(token: Path) -> Path:
    """Create ``token``, its turnstile, its ready gate and its context lock, readable by all (a container's user
    opens them read-only)."""
    for path in token_files(token):
        if not path.exists():
            path.touch()
            path.chmod(0o644)
    return token


class DeviceToken:
    """One process's handle on a device's token: held in one mode at a time, every window recorded.

    No path (a run without a token): every call is a no-op. Under ``isolation="measurements"``
    shared windows are recorded but take no lock.
    """

    def __init__(
        self,
        path: str | Path | None,
        record: dict | None = None,
        isolation: str = ISOLATE_DEVICE,
        cuts_in: bool | Callable[[], bool] = False,
    ) -> None:
        if isolation not in ISOLATIONS:
            raise ValueError(f"measurement isolation {isolation!r}: expected one of {', '.join(ISOLATIONS)}")
        self.record = record if record is not None else {}
        self.mode: str | None = None
        self.isolation = isolation
        # Shared windows past the ready gate and the turnstile (a warm-up beside the sweep): always, or once the
        # question says so (asked while the window waits at the gate).
        self.cuts_in = cuts_in
        self._approaching = False  # the turnstile held and the token shared, before an exclusive turn
        self._ready = False  # the ready gate held shared: ready for a turn (from approach until the turn)
        self._token = self._turnstile = self._gate = None
        if path:
            self._token = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            self._turnstile = os.open(turnstile_of(path), os.O_RDONLY | os.O_CLOEXEC)
            self._gate = os.open(ready_gate_of(path), os.O_RDONLY | os.O_CLOEXEC)
            self.record.update(path=str(path), isolation=isolation, waited_s=0.0, windows=[])

    def hold(self, mode: str) -> None:
        """Hold the token in ``mode``: from exclusive, step down to shared at once; after ``approach``, take the
        turn (or give up the turnstile); otherwise let go of the mode held now and queue through the turnstile
        (flock cannot convert atomically)."""
        if self._token is None:
            return
        if mode not in (SHARED, EXCLUSIVE):
            raise ValueError(f"device token mode {mode!r}: expected {SHARED!r} or {EXCLUSIVE!r}")
        if self._approaching:
            self._approaching = False
            if mode == SHARED:  # no turn after all: shared as before, and others may come in again
                if self.isolation == ISOLATE_MEASUREMENTS:
                    fcntl.flock(self._token, fcntl.LOCK_UN)  # shared work takes no lock there
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                self._not_ready()
                return
            asked = time.time()
            self.record["windows"][-1][1] = asked
            self.mode = None  # flock lets go of the shared lock first: held in no mode until the turn
            try:
                # Shared to exclusive: flock lets go, then waits. Nobody else can ask in between (asking goes
                # through the turnstile, held here); it waits for the shared holders that were in before.
                fcntl.flock(self._token, fcntl.LOCK_EX)
            finally:
                fcntl.flock(self._turnstile, fcntl.LOCK_UN)
                self._not_ready()
            self._opened(asked, EXCLUSIVE)
            return
        if mode == self.mode:
            return
        asked = time.time()
        if mode == SHARED and self.isolation == ISOLATE_MEASUREMENTS:
            self.release()  # shared work excludes nobody here: no lock, only the window
        elif self.mode == EXCLUSIVE:
            # Stepping down after a measurement: straight to shared, not through the turnstile, so the
            # checks after timing need not queue behind the next measurement (which waits for them).
            self.record["windows"][-1][1] = asked
            fcntl.flock(self._token, fcntl.LOCK_SH)
        elif mode == SHARED and self.cuts_in is True:
            self.release()
            fcntl.flock(self._token, fcntl.LOCK_SH)  # waits for the measurement in its turn, and for no queue
        elif mode == SHARED and callable(self.cuts_in):
            self.release()
            self._shared_once_told(self.cuts_in)
        else:
            self.release()
            if mode == SHARED:
                # A newcomer waits while any measurement is ready for its turn (the gate held shared by them);
                # the gate is let go at once: it only waits, it holds nothing out.
                fcntl.flock(self._gate, fcntl.LOCK_EX)
                fcntl.flock(self._gate, fcntl.LOCK_UN)
            self._through_turnstile(fcntl.LOCK_EX if mode == EXCLUSIVE else fcntl.LOCK_SH)
        self._opened(asked, mode)

    def _through_turnstile(self, lock: int) -> None:
        """Take the token with flock's ``lock`` by way of the turnstile, let go of once the token is held. Never
        taken while the token is held, so the turnstile's holder only ever waits for the token."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._token, lock)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def _shared_once_told(self, told: Callable[[], bool]) -> None:
        """Hold the token shared: as a newcomer does (the ready gate, the turnstile) while ``told()`` says no, asking
        every ``TOLD_POLL_S`` as it waits at the gate; cutting in (the token alone) once it says yes."""
        while not told():
            try:
                fcntl.flock(self._gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a measurement is ready
                time.sleep(TOLD_POLL_S)
                continue
            fcntl.flock(self._gate, fcntl.LOCK_UN)
            self._through_turnstile(fcntl.LOCK_SH)
            return
        fcntl.flock(self._token, fcntl.LOCK_SH)

    def approach(self) -> None:
        """Queue for the exclusive turn, holding the token shared meanwhile: the turnstile is taken (no holder
        comes in after this one) and the token held shared once no measurement runs. What runs now runs beside
        the shared holders that were in before (other evaluations' checks, the last measurement's checks
        after timing), never beside a measurement; ``hold(EXCLUSIVE)`` then waits for those holders alone,
        ``hold(SHARED)`` lets the turnstile go. A measurement's warm-up runs here (``timing.measure_pair``)."""
        if self._token is None:
            return
        if self._approaching or self.mode == EXCLUSIVE:
            raise RuntimeError("approach() is for a holder on its way to its turn, not in it")
        self.release()
        asked = time.time()
        fcntl.flock(self._gate, fcntl.LOCK_SH)  # ready: newcomers wait at the gate until the turn
        self._ready = True
        try:
            fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        except BaseException:
            self._not_ready()
            raise
        try:
            # Under either isolation: a shared lock waits out the measurement that holds the token now.
            fcntl.flock(self._token, fcntl.LOCK_SH)
        except BaseException:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
            self._not_ready()
            raise
        self._approaching = True
        self._opened(asked, SHARED)

    def _not_ready(self) -> None:
        """Let go of the ready gate, where this holder held it."""
        if self._ready:
            self._ready = False
            fcntl.flock(self._gate, fcntl.LOCK_UN)

    def _opened(self, asked: float, mode: str) -> None:
        """Record the window opened now in ``mode``, asked for at ``asked``."""
        now = time.time()
        self.record["waited_s"] = round(self.record["waited_s"] + now - asked, 6)
        self.record["windows"].append([now, None, mode])
        self.mode = mode

    def release(self) -> None:
        if self.mode is None:
            return
        self.record["windows"][-1][1] = time.time()
        if self.mode == EXCLUSIVE or self.isolation == ISOLATE_DEVICE or self._approaching:
            fcntl.flock(self._token, fcntl.LOCK_UN)
        if self._approaching:
            self._approaching = False
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        self._not_ready()
        self.mode = None

    def close(self) -> None:
        self.release()
        for descriptor in (self._token, self._turnstile, self._gate):
            if descriptor is not None:
                os.close(descriptor)
        self._token = self._turnstile = self._gate = None

    def __enter__(self) -> DeviceToken:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def device_token(path: str | Path | None, mode: str = EXCLUSIVE, record: dict | None = None):
    """Hold the token at ``path`` in ``mode`` for the block (none: nothing to hold)."""
    with DeviceToken(path, record) as token:
        token.hold(mode)
        yield token


@contextmanager
def one_context_at_a_time(token: str | Path | None, record: dict):
    """Hold the device's context lock (``context_lock_of(token)``) for the block, in which the caller makes its
    CUDA context: the run's workers on one device make theirs one after another. The driver makes a device's
    contexts one at a time anyway: on the H200, eight forked at once all had theirs after 0.94-1.14 s, where one
    alone took 0.25-0.34 s, and eight taking turns had theirs at 0.26, 0.45, ... 1.64 s (BENCHMARKS.md,
    fifty-second session). So taking turns costs the last of a wave half a second and gives the first, a run's
    first evaluation, its context 0.8 s sooner. No lock where there is no token path (a run without one) or no
    such file (a token made by an older kbench); the record says why. It is an exclusive flock on a read-only
    descriptor, as the token's: the kernel drops it if the holder dies. Its waits and window go into ``record``:
    ``waited_s``, ``window`` ([start, end], epoch seconds, the lock held), or ``not taken``."""
    descriptor = open_context_lock(token, record)
    if descriptor is None:
        yield
        return
    try:
        asked = time.time()
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        held = time.time()
        record["waited_s"] = round(held - asked, 6)
        try:
            yield
        finally:
            record["window"] = [held, time.time()]
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def open_context_lock(token: str | Path | None, record: dict) -> int | None:
    """A read-only descriptor on the device's context lock (``context_lock_of(token)``) to flock; None where there is
    no token path (a run without one) or no such file (a token made by an older kbench), ``record["not taken"]``
    saying which."""
    if not token:
        record["not taken"] = "no device token"
        return None
    try:
        return os.open(context_lock_of(token), os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        record["not taken"] = f"{type(exc).__name__}: {exc}"
        return None


def token_windows(record: dict) -> list[tuple[float, float, str]]:
    """The closed windows of a result's ``environment.device_token`` record."""
    return [(start, end, mode) for start, end, mode in record.get("windows", []) if end is not None]
