"""The executor interface: run the worker on a job directory, with limits, and say how it ended."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runner.paths import MANIFESTS_DIR
from runner.worker.device_token import PREINIT_UNDER_TOKEN, WAIT_STAGE
from runner.worker.protocol import read_stage

# In a run's folder: one line for each spare the executor dismissed without a job (``dismissed_spare``), its start's
# record (its CUDA context's window, its pre-warm's), kept by ``kbench run`` once the executor has closed
# (``keep_dismissed_spares``); ``runner.bench disturbed`` counts their device work beside the measurements. A spare that
# got a job keeps the same record in its result's environment.
SPARES_LOG = "spares.jsonl"

# From handing a job over to the worker starting it (its stage marker): imports under load, and
# the wait for the device token while other evaluations in flight hold it (added per evaluation).
STARTUP_LIMIT_S = 300

# Where the CUDA driver keeps the kernels it compiles from PTX at their first use (by default under HOME, which is
# each sandbox's own). Some of PyTorch's kernels ship without code for the GPU: torch.prod's took 0.9-1.2 s per
# dtype in every fresh HOME on the H100, 44-57 ms from a shared cache (BENCHMARKS.md, twenty-second session), so the
# executors point it at the run's cache where its sandboxes share one.
CUDA_JIT_CACHE_ENV = "CUDA_CACHE_PATH"


class ExecutorUnavailable(RuntimeError):
    """The executor cannot run anything (no engine, no image, a rejected image): the runner's fault, one line."""


@dataclass(frozen=True)
class ExecutorSettings:
    timeout_s: float = 600.0
    output_limit_bytes: int = 64 << 20
    file_size_limit_bytes: int = 2 << 30
    env_passthrough: tuple[str, ...] = ()
    cache_dir: Path | None = None  # compile caches (inductor, triton) shared within a run
    compile_threads: int = 1  # TORCHINDUCTOR_COMPILE_THREADS inside the sandbox
    spare_context_under_token: bool = False  # a spare's CUDA context made holding the device token (shared)
    prestart: int = 0  # workers started ahead, per device, waiting for their job (imports and CUDA init hidden)
    start: str = "fork"  # local only: "fork" (from a fork server that imported once) or "exec" (fresh interpreters)
    in_flight: int = 1  # evaluations running at once per device; their measurements take turns on its token
    # Sandbox limits the local executor cannot enforce (it has no cgroup): docker applies them.
    memory_limit_bytes: int = 16 << 30
    pids_limit: int = 1024
    cpus: float | None = None  # a CFS quota distorts timings: none unless asked for
    # Docker only: which locked image ("cpu", "gpu": entries of the lock), and how the GPU is handed over.
    image: str = "cpu"
    image_lock: Path = MANIFESTS_DIR / "images.lock"
    allow_unlocked_image: bool = False
    gpu_request: str = "uuid"  # "uuid": a DeviceRequest for the GPU's UUID; "cdi": a CDI device name
    cdi_kind: str = "nvidia.com/gpu"
    scratch_mb: int = 4096  # tmpfs for /tmp, HOME and the compile caches
    shared_compile_cache: bool = False  # mount the run's compile cache (read-write, shared) instead of a tmpfs

    @property
    def cuda_preinit(self) -> str:
        """``PREINIT_ENV`` for a worker on a GPU: make its CUDA context at once ("1"), or holding the token."""
        return PREINIT_UNDER_TOKEN if self.spare_context_under_token else "1"


@dataclass
class ExecutionOutcome:
    """How the sandbox ended; the verdict is decided from this and the result file."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    wall_s: float
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    output_truncated: bool = False
    environment: dict = field(default_factory=dict)


class Executor(Protocol):
    name: str

    def environment(self) -> dict:
        """What the evaluations run in (``{"kind": "host"}`` or an image digest)."""

    def own_pids(self) -> set[int]:
        """Processes of this executor that may hold a GPU context between evaluations."""

    def prepare(self, gpus: list[str | None]) -> None:
        """Start, in the background, what may start before any device is locked: nothing that touches
        a device (the local executor's fork servers). Returns at once."""

    def run(self, job_dir: Path, gpu: str | None) -> ExecutionOutcome:
        """Run the worker on ``job_dir`` (pinned to ``gpu``, a UUID or index, when given)."""

    def close(self) -> None:
        """Release anything held between evaluations."""

    def dismissed_spares(self) -> list[dict]:
        """The records of the spares ``close`` dismissed without a job (``dismissed_spare``), in the order dismissed."""


class SparePool:
    """Pre-started sandboxes per device, and the ones running a job: the bookkeeping both executors share.

    A spare is pinned to its GPU, so each device has its own list; several evaluations in flight
    (on one lane or several) take from and refill them from their own threads.
    """

    def __init__(self) -> None:
        self._spares: dict[str | None, list] = {}
        self._starting: dict[str | None, int] = {}  # spares being started now, per device, not in the list yet
        self._filled: set = set()  # the devices spares were ever started for
        self._running: set = set()
        self._dismissed: list[dict] = []  # the records of the spares ``drain`` dismissed (``dismissed_spare``)
        self._lock = threading.Lock()

    def take(self, gpu: str | None, ready):
        """A spare for ``gpu`` that is ``ready``, or None; spares found not ready are discarded."""
        stale = []
        with self._lock:
            spares = self._spares.setdefault(gpu, [])
            while spares:
                spare = spares.pop(0)
                if ready(spare):
                    break
                stale.append(spare)
            else:
                spare = None
        for dead in stale:
            dead.discard()
        return spare

    def cold(self, gpu: str | None) -> bool:
        """Whether no spare was ever started for ``gpu``."""
        with self._lock:
            return gpu not in self._filled

    def refill(self, gpu: str | None, count: int, start) -> None:
        """Start spares for ``gpu`` (``start(gpu)``) until ``count`` wait or are on their way; started outside
        the lock, as a container takes a while to start. The ones on their way count: the run's first
        evaluations refill at once from their own threads, and before they did, each of eight started the
        whole ``count`` (on the H100, 18-31 workers making CUDA contexts in the run's first 15 s instead of
        at most 14, beside its first measurements: BENCHMARKS.md, seventeenth session)."""
        with self._lock:
            self._filled.add(gpu)
            missing = count - len(self._spares.setdefault(gpu, [])) - self._starting.get(gpu, 0)
            if missing <= 0:
                return
            self._starting[gpu] = self._starting.get(gpu, 0) + missing
        for started in range(missing):
            try:
                spare = start(gpu)
            except BaseException:
                with self._lock:
                    self._starting[gpu] -= missing - started  # this one and the ones not started
                raise
            with self._lock:
                self._starting[gpu] -= 1
                self._spares[gpu].append(spare)

    @contextmanager
    def running(self, sandbox):
        """``sandbox`` counts as one of this executor's own (``members``) while it runs its job."""
        with self._lock:
            self._running.add(sandbox)
        try:
            yield sandbox
        finally:
            with self._lock:
                self._running.discard(sandbox)

    def members(self) -> list:
        """Every spare and every running sandbox (their processes may hold a GPU context)."""
        with self._lock:
            return [s for spares in self._spares.values() for s in spares] + list(self._running)

    def drain(self, record_of) -> list:
        """Remove every spare and hand them over, to be discarded; each one's record kept first (``dismissed``):
        ``dismissed_spare`` of ``record_of(spare)``, the file its worker wrote its start to and the executor's own
        record of its start."""
        with self._lock:
            spares = [s for spares in self._spares.values() for s in spares]
            self._spares.clear()
        dismissed_at = time.time()
        records = [dismissed_spare(*record_of(spare), dismissed_at) for spare in spares]
        with self._lock:
            self._dismissed += records
        return spares

    def dismissed(self) -> list[dict]:
        """The records of the spares ``drain`` dismissed without a job, in the order dismissed."""
        with self._lock:
            return list(self._dismissed)


def dismissed_spare(record_file: Path, started: dict, dismissed_at: float) -> dict:
    """A spare dismissed without a job: what its worker wrote of its start to ``record_file``
    (``prewarm.write_spare_record``: its pid, when it was ready, its context's and pre-warm's windows), or, where
    it had not finished its start, that it had not (``start_done``); with the executor's own record of its start
    (``started``) and when it was dismissed."""
    line = {"started": dict(started), "dismissed_at": dismissed_at}
    try:
        record = json.loads(record_file.read_text())
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict):
        return {**line, "start_done": False}
    return {**record, **line, "start_done": True}


def keep_dismissed_spares(run_path: Path, lines: list[dict]) -> None:
    """Append ``lines`` (``Executor.dismissed_spares``) to the run's ``SPARES_LOG``; nothing where there are none."""
    if not lines:
        return
    with open(run_path / SPARES_LOG, "a") as log:
        log.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)


def wait_for_worker(wait_until, marker: Path, started: float, settings: ExecutorSettings, on_started=None):
    """Wait for a worker handed its job at ``started``; ``wait_until(deadline)`` gives its exit status or None.

    The time limit counts from the moment the worker starts the job, i.e. holds the device token
    and writes its stage marker: a slow start on a busy host, or the wait while the other
    evaluations in flight use the device, is never a candidate's timeout. For the same reason the
    clock stops while the marker says the worker waits for its measurement's turn
    (``device_token.WAIT_STAGE``), up to one time limit per other evaluation in flight. A worker
    that never starts is given up after ``STARTUP_LIMIT_S`` plus one time limit per other
    evaluation in flight. ``on_started()``, if given, is called once the worker has started the job.
    Returns ``(status, timed_out, never_started)``; the caller kills what is still running.
    """
    others = (settings.in_flight - 1) * settings.timeout_s
    deadline = started + max(STARTUP_LIMIT_S, settings.timeout_s) + others
    status = None
    while not marker.exists() and status is None and time.perf_counter() < deadline:
        status = wait_until(min(time.perf_counter() + 0.2, deadline))
    never_started = status is None and not marker.exists()
    if status is not None or never_started:
        return status, False, never_started
    if on_started is not None:
        on_started()
    running_left, waiting_left = float(settings.timeout_s), float(others)
    while status is None and running_left > 0:
        waiting = waiting_left > 0 and read_stage(marker) == WAIT_STAGE
        step = min(_POLL_S, waiting_left if waiting else running_left)
        before = time.perf_counter()
        status = wait_until(before + step)
        spent = time.perf_counter() - before
        if waiting:
            waiting_left -= spent
        else:
            running_left -= spent
    return status, status is None, False


# How often a running worker's stage is read (the clock stops while it waits for the device).
_POLL_S = 0.5
