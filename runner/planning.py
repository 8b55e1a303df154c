"""A run's plan and its evaluations' job directories: the suite's tasks × the configured methods give one evaluation
each (its candidate a content-addressed file, or the reason there is none), and each evaluation's job is the folder
a worker reads (``runner/worker/protocol.py``): the task's file, the candidate's, and the job with its shapes, trials
and timing settings."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from runner.methods import METHODS, Candidate, MethodUnavailable
from runner.run_settings import RunSettings
from runner.tasks.model import Task
from runner.worker.protocol import (
    CANDIDATE_FILE,
    JOB_FILE,
    OUT_DIR,
    PROTOCOL_VERSION,
    TASK_FILE,
    write_json_atomic,
    write_text_atomic,
)


@dataclass
class Evaluation:
    """One evaluation of the plan: a task and a method, with the candidate the method gave (None: ``missing_reason``
    says why); ``eval_id`` hashes all four, so a resumed run finds it again."""

    eval_id: str
    task: Task
    method: str
    candidate: Candidate | None
    missing_reason: str = ""


def plan(tasks: list[Task], settings: RunSettings) -> list[Evaluation]:
    """Method-major: the whole suite for the first method (``reference``, the sanity check, first), then the next."""
    evaluations = []
    for method_name, options in settings.methods.items():
        for task in tasks:
            produce = METHODS.get(options["kind"])
            try:
                candidate = produce(task, options)
                missing = ""
            except MethodUnavailable as exc:
                candidate, missing = None, str(exc)
            key = f"{method_name}|{task.task_id}|{task.content_hash}|{candidate.content_hash if candidate else missing}"
            eval_id = hashlib.sha256(key.encode()).hexdigest()[:16]
            evaluations.append(Evaluation(eval_id, task, method_name, candidate, missing))
    return evaluations


def store_candidate(store: Path, candidate: Candidate) -> Path:
    """The run's copy of ``candidate`` (one file per content hash), written whole before anyone can read it.

    Evaluations in flight prepare their jobs at once, and the same candidate can serve several
    (one per method or task): a plain write let another thread copy the file while half written
    (seen: a reference evaluation whose candidate defined no ModelNew, tests/test_pipeline.py).
    """
    store.mkdir(exist_ok=True)
    stored = store / f"{candidate.content_hash.split(':', 1)[1]}.py"
    if not stored.exists():
        write_text_atomic(stored, candidate.source)
    return stored


def _shapes_for(task: Task, wanted: list[str]) -> list[str]:
    present = [name for name in wanted if name in task.shapes]
    return present or [task.shape_names()[0]]


def _timed_shape(task: Task, wanted: str) -> str:
    return wanted if wanted in task.shapes else task.shape_names()[-1]


def _trials_per_shape(task: Task, s: RunSettings) -> dict[str, int]:
    """Correctness trials for each checked shape: ``timed_shape_trials`` at the timed shape, ``trials`` elsewhere."""
    timed = _timed_shape(task, s.timed_shape)
    return {
        shape: s.timed_shape_trials if shape == timed and s.timed_shape_trials is not None else s.trials
        for shape in _shapes_for(task, s.check_shapes)
    }


def prepare_job(
    settings: RunSettings, run_path: Path, evaluation: Evaluation, root: Path | None = None, mode: str = "evaluate"
) -> Path:
    """``evaluation``'s job directory (under ``root``, else the run's ``jobs/``): the task's and the candidate's files
    and the job, read-only; a half-done one from before a kill is made again. ``mode``: ``evaluate``, or ``warmup``
    (the compile warm-up's run of the candidate)."""
    s = settings
    task = evaluation.task
    job_dir = (root or run_path / "jobs") / evaluation.eval_id
    if job_dir.exists():
        shutil.rmtree(job_dir)  # a half-done attempt from before a kill
    (job_dir / OUT_DIR).mkdir(parents=True)
    shutil.copyfile(task.path, job_dir / TASK_FILE)
    shutil.copyfile(store_candidate(run_path / "candidates", evaluation.candidate), job_dir / CANDIDATE_FILE)
    job = {
        "protocol": PROTOCOL_VERSION,
        "eval_id": evaluation.eval_id,
        "mode": mode,
        "task": task.to_job(),
        "candidate_hash": evaluation.candidate.content_hash,
        "device": "cuda:0" if s.device == "cuda" else "cpu",
        "seed": s.seed,
        "trials": s.trials,
        "trials_per_shape": _trials_per_shape(task, s),
        "check_shapes": _shapes_for(task, s.check_shapes),
        "timed_shape": _timed_shape(task, s.timed_shape),
        "timing": s.timing,
        "peaks": s.peaks,
        "integrity_policy": s.methods[evaluation.method]["integrity_policy"],
        "threads": s.cpu_threads,
        "measurement_isolation": s.measurement_isolation,
        "release_under_token": s.release_under_token,
        "quiet_waiting_turns": s.quiet_waiting_turns,
        "preload_kernels": s.preload_kernels,
        "preload_candidate": s.preload_candidate,
        "meta": job_meta(s, evaluation),
    }
    if mode == "warmup":
        job["warmup_beside"] = s.warmup_beside
        job["warmup_cut_in"] = "always" if s.warmup_cut_in_within is None else "told"
    write_json_atomic(job_dir / JOB_FILE, job)
    for path in (job_dir / TASK_FILE, job_dir / CANDIDATE_FILE, job_dir / JOB_FILE):
        path.chmod(0o444)
    return job_dir


def job_meta(settings: RunSettings, evaluation: Evaluation) -> dict:
    """What a result's job says of where it came from (the method, model, suite, hardware, executor, the candidate's
    provenance) and the task's FLOPs and bytes."""
    s = settings
    return {
        "method": evaluation.method,
        "model": s.model,
        "suite": s.suite,
        "hardware": s.hardware,
        "executor": s.executor,
        "provenance": evaluation.candidate.provenance if evaluation.candidate else {},
        "flops": evaluation.task.flops,
        "bytes": evaluation.task.bytes,
    }
