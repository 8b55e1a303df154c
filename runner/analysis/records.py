"""Flat evaluation records: one row per evaluation, derived from job and result files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from runner.worker.autotuning import UNCACHED
from runner.worker.protocol import JOB_FILE, OUT_DIR, RESULT_FILE, SAMPLES_FILE, Result

# How the candidate's kernels with a choice of configs got theirs (``_autotuned``): Inductor's read from the compile
# cache, Inductor's autotuned during the evaluation, the candidate's own ``@triton.autotune`` ones.
AUTOTUNING_COLUMNS = ("kernels_cached", "kernels_autotuned_here", "kernels_triton_autotune")

COLUMNS = [
    "eval_id",
    "task_id",
    "category",
    "level",
    "method",
    "model",
    "hardware",
    "verdict",
    "reason",
    "speedup",
    "reference_ms",
    "candidate_ms",
    "ratio_noise",
    "placement_noise",
    "audits_topped_up",
    "audits_rechecked",
    "samples",
    "measured_s",
    "duration_s",
    "candidate_tbps",
    "candidate_tflops",
    "candidate_sol_pct",
    "reference_sol_pct",
    "sm_clock_mhz",
    *AUTOTUNING_COLUMNS,
]


def flatten(job: dict, result: Result) -> dict:
    meta = job["meta"]
    timing = result.timing
    return {
        "eval_id": result.eval_id,
        "task_id": result.task_id,
        "category": job["task"]["category"],
        "level": job["task"]["level"],
        "method": meta["method"],
        "model": meta["model"],
        "hardware": meta["hardware"],
        "verdict": result.verdict.status,
        "reason": result.verdict.reason,
        "speedup": timing.speedup if timing else None,
        "reference_ms": timing.reference.median_ms if timing else None,
        "candidate_ms": timing.candidate.median_ms if timing else None,
        "ratio_noise": timing.ratio_noise if timing else None,
        "placement_noise": timing.placement_noise if timing else None,
        # A side's few audits of one shape would have flagged unjoined work and fresh ones topped them up (timing.py)
        "audits_topped_up": bool(timing.audit_top_up) if timing else None,
        # Its measurement's sync audits (topped up or not) would have flagged it and fresh ones were judged (timing.py)
        "audits_rechecked": bool(timing.audit_recheck) if timing else None,
        "samples": timing.candidate.samples if timing else None,
        "measured_s": timing.measured_s if timing else 0.0,
        "duration_s": result.finished_at - result.started_at if result.finished_at else None,
        "candidate_tbps": result.roofline.get("candidate", {}).get("tbps"),
        "candidate_tflops": result.roofline.get("candidate", {}).get("tflops"),
        "candidate_sol_pct": result.roofline.get("candidate", {}).get("sol_pct"),
        "reference_sol_pct": result.roofline.get("reference", {}).get("sol_pct"),
        "sm_clock_mhz": timing.sm_clock_mhz if timing else None,
        **_autotuned(result.autotuning),
    }


def _autotuned(record: dict) -> dict:
    """How the candidate's kernels with a choice of configs got theirs (``runner/worker/autotuning.py``): Inductor's
    read from the compile cache (chosen by an earlier process), Inductor's autotuned during the evaluation, and the
    candidate's own ``@triton.autotune`` ones; None where the result has no record."""
    if "kernels" not in record:
        return dict.fromkeys(AUTOTUNING_COLUMNS)
    found = [kernel.get("found_by") for kernel in record["kernels"] if kernel["kind"] == "inductor"]
    return {
        "kernels_cached": found.count("hit"),
        "kernels_autotuned_here": found.count("miss") + found.count(UNCACHED),
        "kernels_triton_autotune": sum(kernel["kind"] == "triton.autotune" for kernel in record["kernels"]),
    }


def samples_path(run_dir: Path, eval_id: str) -> Path:
    """Where an evaluation of a run directory keeps its raw samples (``samples.json``), whether or not it wrote one."""
    return run_dir / "jobs" / eval_id / OUT_DIR / SAMPLES_FILE


def job_results(run_dir: Path) -> list[tuple[dict, Result]]:
    """Every finished evaluation of a run directory: its job description and its result."""
    pairs = []
    for job_dir in sorted((run_dir / "jobs").glob("*")):
        result_path = job_dir / OUT_DIR / RESULT_FILE
        if not result_path.exists():
            continue
        job = json.loads((job_dir / JOB_FILE).read_text())
        pairs.append((job, Result.from_dict(json.loads(result_path.read_text()))))
    return pairs


def records_from_run_dir(run_dir: Path) -> pd.DataFrame:
    rows = [flatten(job, result) for job, result in job_results(run_dir)]
    return pd.DataFrame(rows, columns=COLUMNS)


def records_from_jsonl(path: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return pd.DataFrame(rows, columns=COLUMNS)
