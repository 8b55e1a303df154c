"""End to end: ``kbench run`` → result files → MLflow parent and children → ``kbench report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import (
    FAST_TIMING,
    HONEST_CANDIDATE,
    kbench,
    make_kernelbench_dir,
    one_task_reference_run,
    reference_and_directory,
    results_of,
    write_candidates,
)


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tracked")
    suite = make_kernelbench_dir(tmp / "kb", ["1_first", "2_second"])
    cands = write_candidates(tmp / "cands", {"1_first": HONEST_CANDIDATE})  # none for 2_second
    uri = f"sqlite:///{tmp}/mlflow.db"
    proc = kbench(
        *reference_and_directory(suite, cands),
        f"tracking.uri={uri}",
        "run.name=tracked",
        *FAST_TIMING,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    return tmp, run_dir, uri, proc


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_run_prints_report(tracked_run):
    _, run_dir, _, proc = tracked_run
    assert "fast_1" in proc.stdout and (run_dir / "report.md").exists()
    assert "missing_candidate" in (run_dir / "report.md").read_text()
    # Where the wall time went: kept in the manifest, parts that add up to the wall time, in the report.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    parts = manifest["wall_parts_s"]
    assert sum(parts.values()) == pytest.approx(manifest["wall_s"], abs=0.01)
    assert parts["measured"] > 0 and all(seconds >= 0 for seconds in parts.values())
    assert f"measured {parts['measured']:.1f} s" in (run_dir / "report.md").read_text()
    slots = manifest["slot_parts_s"]  # and the slots' time, the workers' part in the report
    assert slots["worker"] > 0 and f"in the worker {slots['worker']:.1f} s" in (run_dir / "report.md").read_text()


def test_the_set_up_is_timed_in_parts(tracked_run):
    """The set-up before the sweep is kept in named parts, from the process's start, that add up to ``setup_s``:
    on an H200 it took 8.4 s (2.7 s on this machine) and nothing said where (BENCHMARKS.md, forty-fifth session)."""
    from runner.analysis.duty import duty

    _, run_dir, uri, _ = tracked_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    parts = manifest["setup_parts_s"]
    # No GPU readings on a CPU run (the manifest keeps its keys sorted, not in the order they ran).
    assert set(parts) == {
        "interpreter",
        "configuration",
        "suite",
        "executor_checks",
        "run_dir",
        "executor",
        "fingerprint",
        "source_diff",
        "orchestrator",
    }
    assert all(seconds >= 0 for seconds in parts.values()) and parts["interpreter"] > 0
    assert sum(parts.values()) == pytest.approx(manifest["setup_s"], abs=0.005)  # each part rounded to the ms
    # MLflow opened beside the sweep's start, timed apart (``runner/tracking/opening.py``); the run's main thread
    # waited for it only when it had a result to log, or at its end.
    beside = manifest["tracking_beside_s"]
    assert set(beside) == {"mlflow_import", "mlflow_store", "mlflow_parent_run", "waited"}
    assert beside["mlflow_import"] + beside["mlflow_store"] > 0.1  # MLflow's share, whatever the machine
    assert 0 <= beside["waited"] <= sum(seconds for part, seconds in beside.items() if part != "waited") + 0.01
    parent = _client(uri).get_run(manifest["mlflow_run_id"])
    assert parent.info.start_time / 1000 > manifest["last_invocation"]["sweep_started"]  # made after the sweep began
    assert duty(run_dir)["setup_parts_s"] == parts
    largest = max(parts.values())
    assert "(the largest part: " in (run_dir / "report.md").read_text()
    assert f" {largest:.1f} s; all in `setup_parts_s`)" in (run_dir / "report.md").read_text()
    # And when the sweep's first measurement came, from the process's start (``runner.analysis.duty.sweep_start``).
    start = manifest["sweep_start_s"]
    assert start["from"] == "process start" and start["first_measurement"] > start["sweep_started"] > 0
    assert start["sweep_started"] == pytest.approx(manifest["setup_s"], abs=0.05)
    assert (
        f"the first measurement {start['first_measurement']:.1f} s after the process started"
        in (run_dir / "report.md").read_text()
    )


def test_a_run_keeps_its_checkouts_difference_from_the_commit(tracked_run):
    """Where the checkout differs from its commit (this one, while a change is being made; never a clean clone), the
    patch that rebuilds it is kept beside the manifest and logged with the parent run; a clean one records none."""
    from runner.tracking.source_diff import source_diff

    _, run_dir, uri, _ = tracked_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    record = manifest["environment"]["host"]["source_diff"]
    now = source_diff()  # the tree the run started from, unchanged since (the tests write nothing in it)
    assert record == (now if isinstance(now, str) else now.record())  # a reason where no patch could be taken
    record = None if isinstance(record, str) else record
    assert (run_dir / "source.diff").exists() == (record is not None)
    parent_artifacts = {a.path for a in _client(uri).list_artifacts(manifest["mlflow_run_id"])}
    assert ("source.diff" in parent_artifacts) == (record is not None)
    if record is not None:
        assert (run_dir / "source.diff").read_bytes() == now.patch
        assert f"`source.diff` ({record['files']} files" in (run_dir / "report.md").read_text()


def test_mlflow_parent_and_children(tracked_run):
    _, run_dir, uri, _ = tracked_run
    client = _client(uri)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    parent = client.get_run(manifest["mlflow_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["suite"] == "kernelbench" and parent.data.params["methods"] == "reference,directory"
    assert parent.data.metrics["reference.correct"] == 2
    parent_artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.yaml", "report.md", "results.jsonl", "manifest.json"} <= parent_artifacts
    experiment = parent.info.experiment_id
    children = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == 4
    by_name = {run.info.run_name: run for run in children}
    honest = by_name["directory/level1/1_first"]
    assert honest.data.tags["verdict"] == "correct"
    for key in ("task", "suite", "method", "model", "hardware", "executor"):
        assert key in honest.data.params
    assert int(honest.data.params["timed_input_seed"]) >= 0  # what redoes this evaluation's timed inputs
    for key in ("correct", "speedup", "candidate_median_ms", "reference_median_ms", "trials"):
        assert key in honest.data.metrics
    for key in ("task_hash", "candidate_hash", "git_commit", "kbench.eval_id"):
        assert honest.data.tags[key]
    artifacts = {a.path for a in client.list_artifacts(honest.info.run_id)}
    assert {"candidate.py", "result.json", "samples.json", "stdout.log", "stderr.log", "job.json"} <= artifacts
    series = client.get_metric_history(honest.info.run_id, "sample_candidate_ms")
    assert len(series) == int(honest.data.metrics["samples"])
    assert by_name["directory/level1/2_second"].data.tags["verdict"] == "compile_error"


def test_report_from_dir_and_from_mlflow(tracked_run):
    tmp, run_dir, uri, _ = tracked_run
    from_dir = kbench("report", str(run_dir), cwd=tmp)
    assert from_dir.returncode == 0 and "## Summary" in from_dir.stdout
    parent_id = json.loads((run_dir / "manifest.json").read_text())["mlflow_run_id"]
    from_mlflow = kbench("report", parent_id, "--tracking-uri", uri, cwd=tmp)
    assert from_mlflow.returncode == 0, from_mlflow.stderr
    assert (tmp / f"report-{parent_id[:12]}.md").read_text() == (run_dir / "report.md").read_text()


def test_a_store_mlflow_cannot_open_leaves_the_run_on_disk(tmp_path: Path):
    """A tracking store that cannot be created (its folder would sit under a file) is one red line: the run
    goes on and its files are the record, with no parent run named. It used to end the run with a traceback."""
    suite = make_kernelbench_dir(tmp_path / "kb", ["1_only"])
    (tmp_path / "a-file").write_text("")
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=reference",
        f"tracking.uri=sqlite:///{tmp_path}/a-file/mlflow.db",
        *FAST_TIMING,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stdout.splitlines() if "MLflow unavailable" in line]
    assert len(said) == 1 and "a-file" in said[0] and "results stay in" in said[0], proc.stdout
    assert "Traceback" not in proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "finished" and manifest["mlflow_run_id"] is None
    assert [row["verdict"] for row in results_of(run_dir)] == ["correct"]
    # The store that failed is no part of its own, nor of the parent run's, which never opened.
    assert set(manifest["tracking_beside_s"]) == {"mlflow_import", "mlflow_unavailable", "waited"}


def test_report_of_nothing_is_one_line(tmp_path: Path):
    proc = kbench("report", "no-such-run", "--tracking-uri", f"sqlite:///{tmp_path}/m.db", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_kernelbench_directory_loads_as_a_suite(tracked_run):
    _, run_dir, _, _ = tracked_run
    rows = results_of(run_dir)
    reference = [r for r in rows if r["method"] == "reference"]
    assert {r["task_id"] for r in reference} == {"level1/1_first", "level1/2_second"}
    assert all(r["verdict"] == "correct" and r["category"] == "level1" for r in reference)


def test_a_fixed_timed_input_seed_is_used_and_recorded(tmp_path: Path):
    """``eval.timing.input_seed`` fixes the timed inputs (to redo an evaluation exactly); by default each
    evaluation draws its own (tests/test_pipeline.py)."""
    job_dir = one_task_reference_run(tmp_path, "eval.timing.input_seed=1234")
    assert json.loads((job_dir / "out" / "result.json").read_text())["timing"]["input_seed"] == 1234
