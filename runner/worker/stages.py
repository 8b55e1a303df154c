"""What every stage of an evaluation in the worker shares (``evaluate.py``, ``correctness.py``, ``timed_stage.py``):
the verdict that ends it early (``Stop``, ``failure``), its stage clock, what its checks cost, its checked shapes,
trials and their seeds, and the record of memory given back."""

from __future__ import annotations

import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import torch

from runner.worker.memory import causes, others_took_it
from runner.worker.protocol import STAGE_FILE, Result, Verdict

# The stages in which no code of the candidate has run yet.
_BEFORE_THE_CANDIDATE = ("start", "reference")
_COMPILE_ERROR_TYPES = ("CompilationError", "BackendCompilerFailed", "InductorError", "CompileError")


class Stop(Exception):
    """Ends the evaluation early with a verdict."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


def note_release(result: Result, released: dict | None) -> None:
    """Keep what ``release_device_memory`` gave back in the result (``environment.device_memory_released``)."""
    if released is not None:
        result.environment.setdefault("device_memory_released", []).append(released)


class CheckCost:
    """Seconds spent in the integrity checks, by kind (``integrity.check_seconds``): inside the correctness
    stage, and the parts of the checks after timing (``timed_output``, ``float64_timed``, ``same_addresses``).

    With the static screen's stage this is what the checks cost an evaluation; the one profiled call of the
    kernel census is in ``correctness``, its profiler's own start and stop in the census record.
    On a GPU a block's cost is the longer of its host time and its device span (two events around it):
    no synchronisation of its own (with several evaluations in flight each one waits for the GPU's time
    slice among their contexts), read once the evaluation's device work is done (``settle``).
    """

    def __init__(self, seconds: dict, device: torch.device) -> None:
        self.seconds, self.device = seconds, device
        self._pending: list = []  # (kind, host seconds, start event, end event), until settled

    @contextmanager
    def __call__(self, kind: str):
        started = time.perf_counter()
        events = None
        if self.device.type == "cuda":
            events = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            events[0].record()
        try:
            yield
        finally:
            host = time.perf_counter() - started
            if events is None:
                self._add(kind, host)
            else:
                events[1].record()
                self._pending.append((kind, host, *events))

    def settle(self) -> None:
        """Add the blocks' device spans; a device that fails here leaves them out, recorded as not settled."""
        pending, self._pending = self._pending, []
        for kind, host, start, end in pending:
            try:
                end.synchronize()
                self._add(kind, max(host, start.elapsed_time(end) / 1e3))
            except RuntimeError as exc:
                self.seconds["not settled"] = str(exc)[:300]
                return

    def _add(self, kind: str, seconds: float) -> None:
        self.seconds[kind] = round(self.seconds.get(kind, 0.0) + seconds, 6)


def checked_shapes(job: dict) -> dict[str, dict]:
    """The shapes checked for correctness, by name: their dimensions."""
    return {name: job["task"]["shapes"][name] for name in job["check_shapes"]}


def trials_per_shape(job: dict) -> dict[str, int]:
    """Correctness trials per checked shape: the orchestrator's ``trials_per_shape``, else ``trials`` for each."""
    given = job.get("trials_per_shape") or {}
    return {name: int(given.get(name, job["trials"])) for name in job["check_shapes"]}


def seed_of_trial(seed: int, trial: int) -> int:
    """The seed of a checked trial's inputs (the compile warm-up's calls draw theirs alike: ``warmup.py``)."""
    return seed + 1000 * (trial + 1)


def is_compile_error(exc: BaseException) -> bool:
    return any(type(e).__name__ in _COMPILE_ERROR_TYPES for e in causes(exc))


def failure(status: str, reason: str, exc: BaseException, stage: str) -> Verdict:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    detail = "".join(lines)[-4000:]
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_initialized() else torch.device("cpu")
    taken = others_took_it(exc, device, candidate_ran=stage not in _BEFORE_THE_CANDIDATE)
    if taken:  # the other evaluations in flight and the spares held the memory: not the candidate's failure
        return Verdict("infra_error", "device_memory_taken", f"out of memory: {taken}\n" + detail, stage)
    return Verdict(status, reason, f"{type(exc).__name__}: {exc}"[:500] + "\n" + detail, stage)


class StageClock:
    """Writes the current stage to ``out/stage`` and accumulates seconds per stage."""

    def __init__(self, out_dir: Path, seconds: dict) -> None:
        self.out_dir = out_dir
        self.seconds = seconds
        self.stage = None
        self.since = time.perf_counter()
        out_dir.mkdir(parents=True, exist_ok=True)

    def mark(self, stage: str) -> None:
        now = time.perf_counter()
        if self.stage is not None:
            self.seconds[self.stage] = round(self.seconds.get(self.stage, 0.0) + now - self.since, 6)
        self.stage, self.since = stage, now
        (self.out_dir / STAGE_FILE).write_text(stage)
