"""A run killed with SIGKILL resumes: nothing redone that was finished, nothing lost, nothing logged twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import FAST_TIMING, kbench, make_kernelbench_dir

TASKS = [f"{i}_task" for i in range(1, 7)]


def _args(tmp: Path) -> list[str]:
    return [
        "run",
        "suite=kernelbench",
        f"suite.path={tmp / 'kb'}",
        "method=reference",
        f"tracking.uri=sqlite:///{tmp}/mlflow.db",
        "run.name=resume",
        *FAST_TIMING,
    ]


def _result_lines(journal: Path) -> list[dict]:
    if not journal.exists():
        return []
    events = []
    for line in journal.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return [e for e in events if e["event"] == "result"]


def test_sigkill_then_resume(tmp_path: Path):
    make_kernelbench_dir(tmp_path / "kb", TASKS)
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", *_args(tmp_path)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 240
    journal = None
    while time.monotonic() < deadline:
        runs = list((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else []
        if runs and len(_result_lines(runs[0] / "journal.jsonl")) >= 2:
            journal = runs[0] / "journal.jsonl"
            break
        time.sleep(0.2)
    assert journal is not None, "the run made no progress"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    done_before = {e["eval_id"] for e in _result_lines(journal)}
    assert 2 <= len(done_before) < len(TASKS)
    mtimes = {eid: (journal.parent / "jobs" / eid / "out" / "result.json").stat().st_mtime_ns for eid in done_before}

    resumed = kbench(*_args(tmp_path), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 1

    results = _result_lines(journal)
    ids = [e["eval_id"] for e in results]
    assert len(ids) == len(set(ids)) == len(TASKS)
    for eid, mtime in mtimes.items():  # finished before the kill: not redone
        assert (journal.parent / "jobs" / eid / "out" / "result.json").stat().st_mtime_ns == mtime

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    parent_id = json.loads((journal.parent / "manifest.json").read_text())["mlflow_run_id"]
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")
    logged = [run.data.tags["kbench.eval_id"] for run in children]
    assert sorted(logged) == sorted(ids)
    assert all(run.info.status == "FINISHED" for run in children)
    parents = client.search_runs([parent.info.experiment_id], "tags.`run_dir` != ''")
    assert len(parents) == 1


def test_a_finished_run_is_not_reopened(tmp_path: Path):
    make_kernelbench_dir(tmp_path / "kb", TASKS[:1])
    args = [a for a in _args(tmp_path) if not a.startswith("tracking")] + ["tracking=off"]
    assert kbench(*args, cwd=tmp_path).returncode == 0
    assert kbench(*args, cwd=tmp_path).returncode == 0
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_unfinished_child_from_a_kill_is_replaced(tmp_path: Path):
    from mlflow.tracking import MlflowClient

    from runner.tracking.mlflow_sink import EVAL_TAG, PARENT_TAG, MlflowSink

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    sink = MlflowSink(uri, "kbench")
    parent = sink.start_parent(None, "p", {}, {})
    client = MlflowClient(tracking_uri=uri)
    torn = client.create_run(sink.experiment_id, tags={EVAL_TAG: "e1", PARENT_TAG: parent}).info.run_id
    child = sink.log_child(parent, "c", {"a": 1}, {"m": 1.0}, {EVAL_TAG: "e1"}, {}, [])
    assert child != torn
    assert client.get_run(torn).info.lifecycle_stage == "deleted"
    assert sink.log_child(parent, "c", {"a": 1}, {"m": 1.0}, {EVAL_TAG: "e1"}, {}, []) == child


def _killed_after_first_result(tmp_path: Path, args: list[str]) -> Path:
    """Start ``kbench`` with ``args``, SIGKILL it once one result is in; its (unfinished) run directory."""
    process = subprocess.Popen(
        [sys.executable, "-m", "runner.cli", *args], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            runs = list((tmp_path / "runs").glob("*")) if (tmp_path / "runs").exists() else []
            if runs and _result_lines(runs[0] / "journal.jsonl"):
                return runs[0]
            time.sleep(0.2)
        raise AssertionError("the run made no progress")
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def test_an_unfinished_run_under_other_settings_is_named_not_resumed(tmp_path: Path):
    """A rerun whose configuration differs starts a new run and says which unfinished one it left, and why; the
    first command, run again, still resumes its own."""
    make_kernelbench_dir(tmp_path / "kb", TASKS)
    args = [a for a in _args(tmp_path) if not a.startswith("tracking")] + ["tracking=off"]
    first = _killed_after_first_result(tmp_path, [*args, "eval.trials=1"])

    other = kbench(*args, "eval.trials=2", cwd=tmp_path)
    assert other.returncode == 0, other.stderr[-3000:]
    expected = f"not resuming runs/{first.name}: its configuration differs in eval.trials; a new run starts"
    assert expected in other.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 2

    again = kbench(*args, "eval.trials=1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming" in again.stdout and first.name in again.stdout and "not resuming" not in again.stdout
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_a_setting_one_saved_configuration_lacks_counts_as_changed():
    """What a kbench version adds to the configuration changes the hash: the message names it, even where its
    value is the default (null)."""
    from omegaconf import OmegaConf

    from runner.configure import changed_settings, compose_config

    cfg = compose_config(["experiment=cpu_smoke"])
    saved = OmegaConf.to_container(cfg)
    del saved["eval"]["timed_shape_trials"]
    saved["executor"]["in_flight"] = 99  # left out of the hash: not a change
    assert changed_settings(OmegaConf.to_yaml(OmegaConf.create(saved)), cfg) == ["eval.timed_shape_trials"]
    assert changed_settings(OmegaConf.to_yaml(cfg), compose_config(["experiment=cpu_smoke", "eval.seed=7"])) == [
        "eval.seed"
    ]


def test_only_unfinished_runs_of_this_very_name_are_left_and_named(tmp_path: Path):
    """Runs of another name that ends with this one, finished runs and folders that are no runs are passed over;
    an unreadable manifest or saved configuration does not stop the new run, it is only named less precisely."""
    from omegaconf import OmegaConf

    from runner.configure import compose_config
    from runner.run_command import _what_changed
    from runner.rundir import open_run_dir

    runs = tmp_path / "runs"
    cfg = compose_config(["experiment=cpu_smoke"])
    other_config = runs / "20261125-010000-smoke-0123456789"  # unfinished, another configuration
    finished = runs / "20261125-010100-smoke-1111111111"
    longer_name = runs / "20261125-010200-big-smoke-2222222222"
    corrupt = runs / "20261125-010300.2-smoke-3333333333"  # a second run started within the same second
    for folder in (other_config, finished, longer_name, corrupt):
        folder.mkdir(parents=True)
    (other_config / "config.yaml").write_text(
        OmegaConf.to_yaml(compose_config(["experiment=cpu_smoke", "eval.seed=7"]))
    )
    (finished / "manifest.json").write_text('{"status": "finished"}')
    (corrupt / "manifest.json").write_text("{not json")
    (corrupt / "config.yaml").write_text("eval: [unclosed")
    (runs / "notes.txt").write_text("not a run")

    run_dir = open_run_dir(runs, "smoke", "abcdef0123", resume=True)
    try:
        assert not run_dir.resumed and run_dir.not_resumed == [corrupt, other_config]
        assert _what_changed(other_config, cfg) == "its configuration differs in eval.seed"
        assert _what_changed(corrupt, cfg).startswith("another configuration (its config.yaml cannot be read: ")
    finally:
        run_dir.release()
