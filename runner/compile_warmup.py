"""The compile warm-up of a run's candidates (``executor.warmup_workers``, ``executor.warmup_beside``): each
non-reference candidate run once in a sandbox of its own to fill the compile caches, so that its evaluation, measured
from scratch in a fresh process, finds them warm. Either before each chunk of the sweep, holding the first device's
work token (``CompileWarmup.before``; the sweep cut into chunks by ``CompileWarmup.chunks``), or beside the sweep
(``CompileWarmup.beside``, ``runner/warmup_beside.py``). The ledger beside the cache (``WarmupLedger``) says which
(task, candidate) pairs are warm for a GPU model and its checked shapes, so a second pass starts measuring at once.
It judges nothing: the orchestrator (``runner/orchestrator.py``) owns the sweep, the lanes and their admissions."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from runner.executors import Executor
from runner.gpu.lock import work_token
from runner.planning import Evaluation
from runner.run_settings import RunSettings
from runner.rundir import tail_text
from runner.warmup_beside import WARMUP_LOG, CutIn, WarmupBeside
from runner.worker.device_token import EXCLUSIVE, device_token
from runner.worker.protocol import OUT_DIR, TAKEN_FILE, WARMUP_RECORD_FILE

if TYPE_CHECKING:
    from runner.gpu.memory_admission import MemoryAdmission
    from runner.orchestrator import Lane


class CompileWarmup:
    """One run's compile warm-up: ``executor`` runs it (the run's own, or one with more room), ``prepare_job`` writes
    a candidate's job directory in warm-up mode, ``running`` counts a warm-up as running on its lane (for the health
    gate) and ``admission_of`` gives a lane's memory admission (None: none)."""

    def __init__(
        self,
        settings: RunSettings,
        run_path: Path,
        executor: Executor | None,
        console: Console,
        prepare_job: Callable[..., Path],
        running: Callable[[Lane], AbstractContextManager],
        admission_of: Callable[[Lane], MemoryAdmission | None],
    ) -> None:
        self.settings = settings
        self.run_path = run_path
        self.executor = executor
        self.console = console
        self.prepare_job = prepare_job
        self.running = running
        self.admission_of = admission_of
        self.warmup_s = 0.0  # the warm-ups before the sweeps, summed
        self.beside_summary: dict | None = None  # the warm-up beside the sweep's (``WarmupBeside.summary``)

    def chunks(self, todo: list[Evaluation], lanes: list[Lane]) -> list[list[Evaluation]]:
        """The sweeps, each after its compile warm-up: chunks of ``4 × warmup_workers`` (a run stopped midway
        loses at most one chunk of warm-up), joined to the one before where one of the two has nothing to
        warm up, so a sweep warms up at most one chunk's candidates, before it starts. Each
        chunk's end drains the pipeline (its last evaluations run with fewer in flight, the next chunk's
        start together): on the H100 a reference pass drained every 32 evaluations, six times for nothing,
        before warm-up-free chunks were joined (BENCHMARKS.md, fifteenth session). Without a warm-up, one
        sweep."""
        if self.executor is None or self.settings.warmup_workers < 1 or self.settings.warmup_beside:
            return [todo] if todo else []
        size = max(1, 4 * self.settings.warmup_workers)
        to_warm = {id(e) for e in self.targets(todo, lanes)}  # the ledger read once
        chunks: list[list[Evaluation]] = []
        warms: list[bool] = []  # whether each chunk has candidates to warm up
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            targets = any(id(e) in to_warm for e in chunk)
            if chunks and not (targets and warms[-1]):
                chunks[-1].extend(chunk)
                warms[-1] = warms[-1] or targets
            else:
                chunks.append(chunk)
                warms.append(targets)
        return chunks

    def targets(self, todo: list[Evaluation], lanes: list[Lane]) -> list[Evaluation]:
        """The evaluations of ``todo`` whose candidates the compile warm-up would run: not the reference's,
        and not already warmed on this GPU (the cache's ledger)."""
        if self.executor is None or self.settings.warmup_workers < 1:
            return []
        ledger = self.ledger(lanes)
        return [
            e
            for e in todo
            if e.candidate is not None
            and self.settings.methods[e.method]["kind"] != "reference"
            and not ledger.has(e.task.content_hash, e.candidate.content_hash)
        ]

    def ledger(self, lanes: list[Lane]) -> WarmupLedger:
        """The ledger of the warm-up executor's cache for the first lane's GPU model and the run's checked shapes."""
        return WarmupLedger(
            self.executor.settings.cache_dir,
            "-".join([lanes[0].reading.get("name") or self.settings.device, *self.settings.check_shapes]),
        )

    def before(self, todo: list[Evaluation], lanes: list[Lane]) -> None:
        """Compile warm-up: run non-reference candidates once, in parallel, to fill the compile caches.

        It holds the first device's work token (nothing else runs device work meanwhile) and
        judges nothing; every evaluation is then measured from scratch in a fresh process that
        finds warm caches. Candidates the cache already warmed on this GPU (its ledger, kept next
        to the cache) are skipped: a second pass over a shared ``compile_cache_dir`` starts measuring
        at once. A cache entry gone missing costs only time: the evaluation compiles for itself.
        """
        workers = self.settings.warmup_workers
        targets = self.targets(todo, lanes)
        if not targets:
            return
        gpu_id = lanes[0].gpu_id
        root = self.run_path / "warmup"
        started = time.perf_counter()
        self.console.print(f"compile warm-up: {len(targets)} candidates, {workers} at a time")
        with device_token(work_token(gpu_id), EXCLUSIVE):
            with ThreadPoolExecutor(workers) as pool:
                outcomes = list(
                    pool.map(lambda e: self.executor.run(self.prepare_job(e, root, "warmup"), gpu_id), targets)
                )
        self.ledger(lanes).add(
            [(e.task.content_hash, e.candidate.content_hash) for e, o in zip(targets, outcomes) if o.exit_code == 0]
        )
        shutil.rmtree(root, ignore_errors=True)
        elapsed = time.perf_counter() - started
        self.warmup_s += elapsed
        failed = sum(1 for outcome in outcomes if outcome.exit_code != 0)
        self.console.print(
            f"compile warm-up done in {elapsed:.0f} s ({failed} failed there; their evaluations say why)"
        )

    @contextmanager
    def beside(self, todo: list[Evaluation], lanes: list[Lane]):
        """The compile warm-up of ``todo``'s candidates beside its sweep, on the first lane (None: none to run)."""
        targets = self.targets(todo, lanes)
        if not targets:
            yield None
            return
        lane = lanes[0]
        root = self.run_path / "warmup"
        ledger = self.ledger(lanes)
        ledger_lock = threading.Lock()

        def warm(evaluation: Evaluation, cut_in: CutIn) -> dict:
            job_dir = self.prepare_job(evaluation, root, "warmup")
            cut_in.place(job_dir / OUT_DIR)
            admission = self.admission_of(lane)
            admitted: dict = {}
            began = (job_dir / OUT_DIR / TAKEN_FILE).exists
            with admission.admitted(None, admitted, began) if admission is not None else nullcontext():
                with self.running(lane):
                    outcome = self.executor.run(job_dir, lane.gpu_id)
            record_path = job_dir / OUT_DIR / WARMUP_RECORD_FILE
            record = json.loads(record_path.read_text()) if record_path.exists() else {}
            if outcome.exit_code == 0:
                with ledger_lock:
                    ledger.add([(evaluation.task.content_hash, evaluation.candidate.content_hash)])
            else:
                record["stderr_tail"] = tail_text(job_dir / OUT_DIR / "stderr.log", 600)
            shutil.rmtree(job_dir, ignore_errors=True)
            return {"exit_code": outcome.exit_code, "wall_s": outcome.wall_s, "admission": admitted, **record}

        workers = self.settings.warmup_workers
        within = self.settings.warmup_cut_in_within
        told = "" if within is None else f", cutting in for the next {within} to start"
        self.console.print(f"compile warm-up beside the sweep: {len(targets)} candidates, {workers} at a time{told}")
        beside = WarmupBeside(targets, warm, workers, self.run_path / WARMUP_LOG, within)
        finished = False
        try:
            yield beside
            finished = True
        finally:
            beside.close(cancel=not finished)
            shutil.rmtree(root, ignore_errors=True)
            self.beside_summary = beside.summary()
            if finished:
                summary = self.beside_summary
                self.console.print(
                    f"compile warm-up beside the sweep: {summary['candidates']} candidates over {summary['span_s']:.0f} s "
                    f"({summary['failed']} failed there; {summary['evaluations_held_back']} evaluations waited for "
                    f"theirs, {summary['held_back_s']:.0f} s together)"
                )


class WarmupLedger:
    """Which (task, candidate) pairs the compile cache at ``cache_dir`` holds warm for one GPU model and
    set of checked shapes (what the warm-up compiled for)."""

    def __init__(self, cache_dir: Path | None, device_and_shapes: str) -> None:
        safe = "".join(ch if ch.isalnum() else "_" for ch in device_and_shapes)
        self.path = Path(cache_dir) / f"warmed-{safe}.txt" if cache_dir else None
        lines = self.path.read_text().split() if self.path and self.path.exists() else []
        self.entries = set(lines)

    def has(self, task_hash: str, candidate_hash: str) -> bool:
        return f"{task_hash}|{candidate_hash}" in self.entries

    def add(self, pairs: list[tuple[str, str]]) -> None:
        if self.path is None or not pairs:
            return
        with self.path.open("a") as handle:
            handle.writelines(f"{task}|{candidate}\n" for task, candidate in pairs)
