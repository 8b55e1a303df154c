"""Correctness trials per checked shape: ``eval.trials`` everywhere, ``eval.timed_shape_trials`` at the timed shape.

The orchestrator writes each job's ``trials_per_shape``; the worker runs that many trials of each shape (the
reference's outputs and the candidate's calls alike), and the kernel census watches one of the trials that run.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

from runner.worker.evaluate import evaluate
from runner.worker.protocol import TimingSettings
from tests.conftest import DOUBLING_TASK, in_process_job, one_task_reference_run


def _two_shape_job(tmp_path: Path, candidate: str, trials_per_shape: dict | None) -> dict:
    shapes = {"small": {"n": 64}, "perf": {"n": 256}}
    job = in_process_job(tmp_path, DOUBLING_TASK, candidate, "double", shapes, TimingSettings(batch=2, warmup_ms=0.0))
    job["check_shapes"] = ["small", "perf"]
    job["trials"] = 3
    if trials_per_shape is not None:
        job["trials_per_shape"] = trials_per_shape
    return job


def test_each_checked_shape_runs_its_own_number_of_trials(tmp_path: Path, monkeypatch):
    from runner.worker.kernel_census import KernelCensus

    planned = []
    plan = KernelCensus.plan

    def recorded_plan(census, first_shape, trials):  # the real plan, its arguments kept
        planned.append((first_shape, trials))
        plan(census, first_shape, trials)

    monkeypatch.setattr(KernelCensus, "plan", recorded_plan)
    candidate = DOUBLING_TASK.replace("class Model(", "class ModelNew(")
    job = _two_shape_job(tmp_path, candidate, {"small": 3, "perf": 1})
    job["check_shapes"] = ["perf", "small"]  # the census watches a trial of the first: one that runs
    result = evaluate(job, tmp_path)
    assert result.verdict.status == "correct", result.verdict
    assert collections.Counter(trial.shape for trial in result.trials) == {"small": 3, "perf": 1}
    assert [trial.trial for trial in result.trials if trial.shape == "perf"] == [0]
    assert planned == [("perf", 1)]


def test_a_job_without_trials_per_shape_runs_trials_at_every_shape(tmp_path: Path):
    candidate = DOUBLING_TASK.replace("class Model(", "class ModelNew(")
    result = evaluate(_two_shape_job(tmp_path, candidate, None), tmp_path)
    assert collections.Counter(trial.shape for trial in result.trials) == {"small": 3, "perf": 3}


def test_a_wrong_answer_in_a_later_trial_of_the_timed_shape_is_still_caught(tmp_path: Path):
    """Fewer trials at the timed shape check fewer inputs there, not fewer calls per trial: the second of two fails."""
    wrong_later = DOUBLING_TASK.replace("class Model(", "class ModelNew(").replace(
        "        return x * 2.0",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        "        return x * 2.0 if x.numel() < 256 or self.calls < 2 else x * 2.5",
    )
    result = evaluate(_two_shape_job(tmp_path, wrong_later, {"small": 3, "perf": 2}), tmp_path)
    assert (result.verdict.status, result.verdict.reason) == ("incorrect", "mismatch"), result.verdict
    assert "shape perf, trial 1" in result.verdict.message


def _failing_at(trial: int, how: str) -> str:
    """A doubling candidate that counts its calls (``self.calls``) and, at the small shape's ``trial``, returns a
    wrong answer (``how="wrong"``) or writes into its input (``how="mutates"``)."""
    failing = "x * 2.5" if how == "wrong" else "x.add_(1.0) * 0.0 + (x - 1.0) * 2.0"
    return DOUBLING_TASK.replace("class Model(", "class ModelNew(").replace(
        "        return x * 2.0",
        "        self.calls = getattr(self, 'calls', 0) + 1\n"
        f"        return {failing} if self.calls == {trial + 1} else x * 2.0",
    )


def test_a_trials_checks_are_judged_before_the_next_trials_call(tmp_path: Path, monkeypatch):
    """Each trial's checks are read after the next trial's synchronisation (runner/worker/host_reads.py), but judged
    before its call: the trial that fails is the one named, the trials recorded end with it, and the candidate is
    not called again; the last trial's checks are judged after the loop."""
    import runner.worker.correctness as correctness_module

    built = []
    build = correctness_module.build_model

    def kept(model_class, *args):  # the real build; the candidates kept to count their calls
        model = build(model_class, *args)
        if model_class.__name__ == "ModelNew":
            built.append(model)
        return model

    monkeypatch.setattr(correctness_module, "build_model", kept)
    for trial, how, status, reason in (
        (1, "wrong", "incorrect", "mismatch"),
        (1, "mutates", "integrity_violation", "input_mutated"),
        (2, "wrong", "incorrect", "mismatch"),  # the small shape's last trial of three
    ):
        built.clear()
        job_dir = tmp_path / f"{how}{trial}"
        job_dir.mkdir()
        result = evaluate(_two_shape_job(job_dir, _failing_at(trial, how), None), job_dir)
        assert (result.verdict.status, result.verdict.reason) == (status, reason), result.verdict
        assert f"shape small, trial {trial}" in result.verdict.message
        recorded = [t.trial for t in result.trials if t.shape == "small"]
        assert recorded == (list(range(trial + 1)) if how == "wrong" else list(range(trial))), recorded
        assert [model.calls for model in built] == [trial + 1]  # no perf shape, no call after the failing one


def test_the_run_writes_trials_per_shape_into_each_job(tmp_path: Path):
    """``eval.timed_shape_trials`` applies to the timed shape (a CPU run times and checks ``small``)."""
    job_dir = one_task_reference_run(tmp_path, "eval.trials=3", "eval.timed_shape_trials=1")
    job = json.loads((job_dir / "job.json").read_text())
    assert job["trials"] == 3 and job["trials_per_shape"] == {job["timed_shape"]: 1}
    result = json.loads((job_dir / "out" / "result.json").read_text())
    assert result["verdict"]["status"] == "correct" and len(result["trials"]) == 1
