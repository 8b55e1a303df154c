"""The executor interface: run the worker on a job directory, with limits, and say how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class ExecutorSettings:
    timeout_s: float = 600.0
    output_limit_bytes: int = 64 << 20
    file_size_limit_bytes: int = 2 << 30
    env_passthrough: tuple[str, ...] = ()
    cache_dir: Path | None = None  # compile caches (inductor, triton) shared within a run
    compile_threads: int = 1  # TORCHINDUCTOR_COMPILE_THREADS inside the sandbox
    prestart: int = 0  # workers started ahead, waiting for their job (imports and CUDA init hidden)


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

    def run(self, job_dir: Path, gpu: str | None) -> ExecutionOutcome:
        """Run the worker on ``job_dir`` (pinned to ``gpu``, a UUID or index, when given)."""

    def close(self) -> None:
        """Release anything held between evaluations."""
