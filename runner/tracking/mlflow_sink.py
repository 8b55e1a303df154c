"""The MLflow sink: one parent run per ``kbench run``, one child run per evaluation.

The result files on disk are the source of truth; this only mirrors them. Every call is
retried, and a sink that still fails raises ``SinkError`` which the orchestrator reports
loudly without stopping the run: the journal keeps the evaluation unlogged and the next
resume logs it. A child run is found by its ``kbench.eval_id`` tag before it is created,
so an evaluation is never logged twice.
"""

from __future__ import annotations

import time
from pathlib import Path

PARENT_TAG = "mlflow.parentRunId"
EVAL_TAG = "kbench.eval_id"
_SERIES_BATCH = 1000


class SinkError(RuntimeError):
    pass


def _retry(action, what: str, attempts: int = 3):
    from mlflow.exceptions import MlflowException

    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except (MlflowException, OSError) as exc:
            if attempt == attempts:
                raise SinkError(f"MLflow {what} failed after {attempts} attempts: {exc}") from exc
            time.sleep(delay)
            delay *= 2


class MlflowSink:
    def __init__(self, uri: str, experiment: str) -> None:
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        found = _retry(lambda: self.client.get_experiment_by_name(experiment), "experiment lookup")
        if found is None:
            self.experiment_id = _retry(lambda: self.client.create_experiment(experiment), "experiment creation")
        else:
            self.experiment_id = found.experiment_id

    def start_parent(self, existing_run_id: str | None, run_name: str, params: dict, tags: dict) -> str:
        if existing_run_id:
            _retry(lambda: self.client.update_run(existing_run_id, status="RUNNING"), "parent resume")
            return existing_run_id
        run = _retry(
            lambda: self.client.create_run(self.experiment_id, run_name=run_name, tags=tags), "parent creation"
        )
        run_id = run.info.run_id
        self._log_flat(run_id, params=params)
        return run_id

    def log_parent_artifacts(self, run_id: str, paths: list[Path], artifact_path: str | None = None) -> None:
        for path in paths:
            if path.exists():
                _retry(lambda p=path: self.client.log_artifact(run_id, str(p), artifact_path), f"artifact {path.name}")

    def finish_parent(self, run_id: str, metrics: dict, status: str = "FINISHED") -> None:
        self._log_flat(run_id, metrics=metrics)
        _retry(lambda: self.client.set_terminated(run_id, status=status), "parent end")

    def find_child(self, parent_id: str, eval_id: str) -> str | None:
        """The finished child run of ``eval_id``; an unfinished one (killed mid-log) is deleted."""
        query = f"tags.`{EVAL_TAG}` = '{eval_id}' and tags.`{PARENT_TAG}` = '{parent_id}'"
        runs = _retry(lambda: self.client.search_runs([self.experiment_id], filter_string=query), "child lookup")
        finished = None
        for run in runs:
            if run.info.status == "FINISHED" and finished is None:
                finished = run.info.run_id
            else:
                _retry(lambda r=run: self.client.delete_run(r.info.run_id), "stale child removal")
        return finished

    def log_child(
        self,
        parent_id: str,
        run_name: str,
        params: dict,
        metrics: dict,
        tags: dict,
        series: dict[str, list[float]],
        artifacts: list[Path],
    ) -> str:
        existing = self.find_child(parent_id, tags[EVAL_TAG])
        if existing:
            return existing
        all_tags = {**tags, PARENT_TAG: parent_id}
        run = _retry(
            lambda: self.client.create_run(self.experiment_id, run_name=run_name, tags=all_tags), "child creation"
        )
        run_id = run.info.run_id
        self._log_flat(run_id, params=params, metrics=metrics)
        self._log_series(run_id, series)
        for path in artifacts:
            if path.exists():
                _retry(lambda p=path: self.client.log_artifact(run_id, str(p)), f"artifact {path.name}")
        _retry(lambda: self.client.set_terminated(run_id, status="FINISHED"), "child end")
        return run_id

    def _log_flat(self, run_id: str, params: dict | None = None, metrics: dict | None = None) -> None:
        from mlflow.entities import Metric, Param

        now = int(time.time() * 1000)
        param_list = [Param(k, str(v)[:6000]) for k, v in (params or {}).items()]
        metric_list = [Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None]
        if param_list or metric_list:
            _retry(lambda: self.client.log_batch(run_id, metrics=metric_list, params=param_list), "log batch")

    def _log_series(self, run_id: str, series: dict[str, list[float]]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        points = [Metric(name, float(v), now, step) for name, values in series.items() for step, v in enumerate(values)]
        for start in range(0, len(points), _SERIES_BATCH):
            chunk = points[start : start + _SERIES_BATCH]
            _retry(lambda c=chunk: self.client.log_batch(run_id, metrics=c), "timing series")
