"""Ending a run: ``results.jsonl`` and ``report.md`` in the run directory, then the MLflow
parent run's artifacts and summary metrics (a failing sink leaves the files as the record)."""

from __future__ import annotations

import json

from rich.console import Console

from runner.analysis.duty import duty
from runner.analysis.metrics import summary
from runner.analysis.records import records_from_run_dir
from runner.analysis.report import render_report
from runner.rundir import RunDir
from runner.tracking.mlflow_sink import MlflowSink, SinkError


def finish(run_dir: RunDir, manifest: dict, sink: MlflowSink | None, console: Console) -> str:
    """Write the report and results, close the parent run; returns the report text."""
    frame = records_from_run_dir(run_dir.path)
    # Where the wall time went (runner/analysis/duty.py), read off the results' token windows; kept in
    # the manifest, so a report rendered later, from the directory or from MLflow, says the same.
    # And where the evaluations' slots spent theirs, where the results say (``slot_parts_s``).
    figures = duty(run_dir.path)
    # And how long its last invocation's first job and measurement took to come (``sweep_start_s``).
    for key in ("wall_parts_s", "slot_parts_s", "sweep_start_s"):
        if figures[key]:
            manifest[key] = {
                part: round(value, 3) if isinstance(value, float) else value for part, value in figures[key].items()
            }
    run_dir.write_manifest(manifest)
    results_path = run_dir.path / "results.jsonl"
    results_path.write_text("".join(json.dumps(row, default=float) + "\n" for row in frame.to_dict("records")))
    report = render_report(frame, manifest)
    (run_dir.path / "report.md").write_text(report)
    if sink is not None and manifest.get("mlflow_run_id"):
        parent = manifest["mlflow_run_id"]
        metrics = {}
        for method in sorted(frame["method"].unique()):
            for key, value in summary(frame[frame["method"] == method]).items():
                metrics[f"{method}.{key}"] = value
        try:
            sink.log_parent_artifacts(parent, [run_dir.path / "report.md", results_path, run_dir.manifest_path])
            sink.finish_parent(parent, {k: v for k, v in metrics.items() if v == v})
        except SinkError as exc:
            console.print(f"[red]MLflow: {exc}; the report is on disk at {run_dir.path / 'report.md'}")
    return report
