"""MLflow opened beside the sweep's start: its import, its store and the run's parent run, in a thread of their own.

A run's set-up waited for MLflow before its sweep started: on the H200, ``import mlflow`` 1.2-1.5 s, opening the
store 1.2-1.5 s, and 2.3 s where the store was new (``make bench``'s first pass: its SQLite schema is made by
Alembic's migrations); a set-up of 5.5 s there, where the fork server, its bytecode read from the machine's cache,
is ready 3.8 s after the process started (BENCHMARKS.md, fiftieth and fifty-first sessions). Nothing of the sweep
needs MLflow before its first result is collected, seconds later: the result files are the record, MLflow mirrors
them. So ``TrackingBeside`` opens it in a thread started before the sweep, and
the sweep's collecting thread (the run's main thread) waits for it when it first has a result to log; a run's end
waits for it too. The thread holds the GIL for most of its seconds (imports, SQLAlchemy): it starts before the
sweep, while the sweep's first workers are still being forked and make their CUDA contexts in processes of their
own. Where MLflow cannot be opened, the run goes on with the files as its record, as before, and says so once.
On the H200 (fifty-first session) the set-up fell from 5.48 to 1.23 s in ``make bench``'s first pass, its first
measurement from 10.4 to 5.9 s after the process started (with the machine's bytecode and check kernels kept apart:
``LocalExecutor._install_cache_dir``), and the run waited 0.0 s for MLflow in both passes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from runner.setup_clock import SetupClock
from runner.tracking.mlflow_sink import MlflowSink


class Tracking(Protocol):
    """What the orchestrator logs through: ``wait()`` gives MLflow's sink and the parent run's id, or ``(None,
    None)``."""

    def wait(self) -> tuple[MlflowSink | None, str | None]: ...


class TrackingBeside:
    """``open_tracking(clock)`` (MLflow's sink and the parent run's id; it marks its parts on ``clock``) runs in a
    thread from construction. ``wait()`` gives its answer, ``(None, None)`` where it raised; the first ``wait`` calls,
    in the waiting thread, ``on_open(parent_run_id)`` where the parent run was opened, else ``on_failure(why)``."""

    def __init__(
        self,
        open_tracking: Callable[[SetupClock], tuple[MlflowSink, str]],
        on_open: Callable[[str], None],
        on_failure: Callable[[str], None],
    ) -> None:
        self._on_open = on_open
        self._on_failure = on_failure
        self._clock = SetupClock(from_process_start=False)
        self._sink: MlflowSink | None = None
        self._parent_run_id: str | None = None
        self._why: str | None = None
        self._settled = False
        self._waited_s = 0.0
        self._thread = threading.Thread(target=self._open, args=(open_tracking,), name="kbench-mlflow", daemon=True)
        self._thread.start()

    def _open(self, open_tracking) -> None:
        try:
            self._sink, self._parent_run_id = open_tracking(self._clock)
        except Exception as exc:  # SinkError, or a store MLflow cannot open at all: the files stay the record
            self._why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}" if str(exc) else type(exc).__name__
            self._clock.mark("mlflow_unavailable")  # the part that failed: not the store's, nor the parent run's

    def wait(self) -> tuple[MlflowSink | None, str | None]:
        """The sink and the parent run's id once MLflow is open (``(None, None)`` where it could not be)."""
        if not self._settled:
            started = time.perf_counter()
            self._thread.join()
            self._waited_s = round(time.perf_counter() - started, 3)
            self._settled = True
            if self._why is not None:
                self._on_failure(self._why)
            elif self._parent_run_id is not None:
                self._on_open(self._parent_run_id)
        return self._sink, self._parent_run_id

    def record(self) -> dict:
        """For the manifest (``tracking_beside_s``): the thread's parts in seconds and how long the run waited
        for it. Call after ``wait``."""
        return {**{part: round(seconds, 3) for part, seconds in self._clock.parts.items()}, "waited": self._waited_s}
