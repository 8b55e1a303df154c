"""What one evaluation's MLflow child run holds, derived from its job directory and result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from runner.analysis.records import AUTOTUNING_COLUMNS, flatten
from runner.tracking.mlflow_sink import EVAL_TAG
from runner.worker.protocol import CANDIDATE_FILE, JOB_FILE, OUT_DIR, RESULT_FILE, SAMPLES_FILE, Result


@dataclass
class ChildRecord:
    run_name: str
    params: dict
    metrics: dict
    tags: dict
    series: dict[str, list[float]]
    artifacts: list[Path]


def child_record(job_dir: Path, result: Result, git_commit: str) -> ChildRecord:
    job = json.loads((job_dir / JOB_FILE).read_text())
    flat = flatten(job, result)
    params = {
        "task": result.task_id,
        "suite": job["meta"]["suite"],
        "method": flat["method"],
        "model": flat["model"],
        "hardware": flat["hardware"],
        "executor": job["meta"]["executor"],
        "category": flat["category"],
        "level": flat["level"],
        "timed_shape": job.get("timed_shape"),
    }
    metrics = {"correct": 1.0 if result.verdict.status == "correct" else 0.0, "trials": len(result.trials)}
    timing = result.timing
    if timing:
        metrics.update(
            speedup=timing.speedup,
            candidate_median_ms=timing.candidate.median_ms,
            reference_median_ms=timing.reference.median_ms,
            ratio_noise=timing.ratio_noise,
            samples=timing.candidate.samples,
            measured_s=timing.measured_s,
        )
        if timing.placement_noise is not None:  # several placements sampled (runner/worker/timing.py)
            metrics.update(placement_noise=timing.placement_noise, placement_spread=timing.placement_spread)
        params["timed_input_seed"] = timing.input_seed  # eval.timing.input_seed=<it> redoes this evaluation
        if timing.audit_top_up:  # a shape's few audits flagged, topped up with fresh ones (runner/worker/timing.py)
            metrics["audits_topped_up"] = 1.0
        if timing.audit_recheck:  # the first audits' evidence, judged again on fresh ones (runner/worker/timing.py)
            metrics["audits_rechecked"] = 1.0
    # The candidate's kernels with a choice of configs, by how they got theirs (runner/worker/autotuning.py; the
    # configs themselves are in the result artifact): where the evaluation recorded any.
    autotuned = {name: flat[name] for name in AUTOTUNING_COLUMNS}
    if any(autotuned.values()):
        metrics.update({name: float(count) for name, count in autotuned.items()})
    tags = {
        EVAL_TAG: result.eval_id,
        "verdict": result.verdict.status,
        "reason": result.verdict.reason,
        "task_hash": result.task_hash,
        "candidate_hash": result.candidate_hash,
        "git_commit": git_commit,
    }
    samples_path = job_dir / OUT_DIR / SAMPLES_FILE
    series = {}
    if samples_path.exists():
        raw = json.loads(samples_path.read_text())
        series = {"sample_reference_ms": raw["reference"], "sample_candidate_ms": raw["candidate"]}
        # The audited calls kept as samples (protocol 3 on), a series of their own: the batches' stay ``batch`` a batch.
        for side, values in raw.get("audit_samples", {}).items():
            series[f"audit_sample_{side}_ms"] = values
    artifacts = [
        job_dir / CANDIDATE_FILE,
        job_dir / JOB_FILE,
        job_dir / OUT_DIR / RESULT_FILE,
        samples_path,
        job_dir / OUT_DIR / "stdout.log",
        job_dir / OUT_DIR / "stderr.log",
    ]
    return ChildRecord(f"{flat['method']}/{result.task_id}", params, metrics, tags, series, artifacts)
