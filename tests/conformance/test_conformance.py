"""The executor conformance suite: the same hostile candidates, run through ``kbench run``, for each executor.

One real run per executor (directory method over a KernelBench-layout folder, one task per case).
Each case must end as its verdict, nothing it started may outlive its sandbox, and the last,
honest candidate must come out correct (the evaluations before it left nothing behind). The
docker run requires an engine and the locked CPU image (``make image-cpu image-lock``): without
them it is skipped, or fails under ``KBENCH_REQUIRE_DOCKER=1`` (CI).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from tests.conformance.cases import FORKS, SECRETS, cases_for
from tests.conformance.engine import leaked_containers, require_docker
from tests.conftest import (
    FAST_TIMING,
    SMALL_TASK,
    kbench,
    make_kernelbench_dir,
    processes_under,
    results_of,
    write_candidates,
)

# ``local`` forks its workers from a fork server (the default); ``local-exec`` starts each as a fresh
# interpreter (``executor.start=exec``): both ways must end every case the same.
EXECUTORS = ["local", "local-exec", pytest.param("docker", marks=pytest.mark.docker)]
KIND = {"local": "local", "local-exec": "local", "docker": "docker"}
# Per executor: what the run is given beyond the shared settings. Docker's limits are set low so
# that the fork bomb and the memory hog meet them quickly.
EXTRA = {
    "local": (),
    "local-exec": ("executor.start=exec",),
    "docker": ("executor.pids_limit=64", "executor.memory_limit_mb=1024"),
}


@pytest.fixture(scope="module", params=EXECUTORS)
def conformance(request, tmp_path_factory):
    label = request.param
    executor = KIND[label]
    if executor == "docker":
        require_docker()
    tmp = tmp_path_factory.mktemp(f"conformance-{label}")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    cases = cases_for(executor)
    sources = {name: case.source.replace("PORT", str(port)) for name, case in cases.items()}
    suite = make_kernelbench_dir(tmp / "kb", sorted(cases))
    candidates = write_candidates(tmp / "cands", sources)
    try:
        proc = kbench(
            "run",
            "suite=kernelbench",
            f"suite.path={suite}",
            "method=directory",
            f"method.directory.path={candidates}",
            # Hostile behaviour must reach the sandbox: the static screen would stop most of it first.
            "method.directory.integrity_policy=off",
            "tracking=off",
            "run.progress=false",
            f"run.name=conformance-{label}",
            f"executor={executor}",
            "executor.timeout_s=20",
            "executor.output_limit_mb=1",
            "executor.prestart=1",
            *EXTRA[label],
            *FAST_TIMING,
            cwd=tmp,
            env=SECRETS,
        )
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    rows = {row["task_id"].split("/", 1)[1]: row for row in results_of(run_dir)}
    return executor, tmp, run_dir, cases, rows


def _out(run_dir: Path, rows: dict, name: str) -> Path:
    return run_dir / "jobs" / rows[name]["eval_id"] / "out"


def _verdict(run_dir: Path, rows: dict, name: str) -> dict:
    return json.loads((_out(run_dir, rows, name) / "result.json").read_text())["verdict"]


def test_every_case_ends_as_its_verdict(conformance):
    _, _, run_dir, cases, rows = conformance
    assert set(rows) == set(cases)
    wrong = {
        name: (rows[name]["verdict"], rows[name]["reason"], _verdict(run_dir, rows, name)["message"][-300:])
        for name, case in cases.items()
        if (rows[name]["verdict"], rows[name]["reason"]) != (case.verdict, case.reason)
    }
    assert not wrong


def test_the_next_evaluation_is_unaffected(conformance):
    _, _, _, _, rows = conformance
    assert rows["99_honest_after"]["verdict"] == "correct"
    assert rows["99_honest_after"]["speedup"] > 0


def test_nothing_outlives_its_sandbox(conformance):
    executor, tmp, run_dir, _, rows = conformance
    assert not processes_under(tmp)
    pid = int((_out(run_dir, rows, "05_hangs_with_child") / "child.pid").read_text())
    if executor == "local":
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
    else:
        assert not leaked_containers()
        assert not list((run_dir / "cache" / "slots").iterdir())


def test_fork_bomb_is_bounded(conformance):
    executor, _, run_dir, _, rows = conformance
    made = int((_out(run_dir, rows, "07_fork_bomb") / "forks.txt").read_text())
    if executor == "docker":
        assert made < FORKS, "the pids limit did not stop the fork bomb"
    else:
        assert made == FORKS


def test_output_flood_is_capped(conformance):
    _, _, run_dir, _, rows = conformance
    out = _out(run_dir, rows, "08_floods_output")
    assert (out / "stdout.log").stat().st_size <= 1 << 20
    assert (out / "stderr.log").stat().st_size <= 1 << 20
    sandbox = json.loads((out / "result.json").read_text())["environment"]["sandbox"]
    assert sandbox["output_truncated"] is True


def test_host_environment_is_not_passed_in(conformance):
    _, _, run_dir, _, rows = conformance
    seen = json.loads((_out(run_dir, rows, "09_reads_host_env") / "env.json").read_text())
    assert not set(SECRETS) & set(seen)
    assert not set(SECRETS.values()) & set(seen.values())


def test_the_run_records_its_environment(conformance):
    executor, _, run_dir, _, rows = conformance
    env = json.loads((_out(run_dir, rows, "01_honest") / "result.json").read_text())["environment"]["executor"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["environment"]["executor"] == env
    if executor == "local":
        assert env["note"] == "host environment, not container"
        start = "exec" if "conformance-local-exec" in run_dir.name else "fork"
        assert env["start"] == start and "fork_server_failed" not in env
        started_by = {row["sandbox"]["started_by"] for row in _environments(run_dir)}
        assert started_by == {"fork server" if start == "fork" else "fresh interpreter"}
    else:
        from runner.executors.image_lock import read_lock

        assert env["image_id"] == read_lock()["cpu"].id and env["lock_check"] == "matched"
        assert "container from kbench-cpu" in (run_dir / "report.md").read_text()


def _environments(run_dir: Path) -> list[dict]:
    return [json.loads(path.read_text())["environment"] for path in run_dir.glob("jobs/*/out/result.json")]


# -- isolation only the docker executor has ------------------------------------------------
def _docker_only(conformance):
    if conformance[0] != "docker":
        pytest.skip("the local executor has no such isolation (by design: use executor=docker)")


def test_writes_outside_the_output_folder_fail(conformance):
    _docker_only(conformance)
    _, tmp, run_dir, _, rows = conformance
    attempts = json.loads((_out(run_dir, rows, "10_writes_outside") / "escape.json").read_text())
    assert attempts and all(outcome.startswith("refused") for outcome in attempts.values()), attempts
    job = run_dir / "jobs" / rows["10_writes_outside"]["eval_id"]
    assert (job / "task.py").read_text() == (tmp / "kb" / "level1" / "10_writes_outside.py").read_text()
    assert (tmp / "kb" / "level1" / "10_writes_outside.py").read_text() == SMALL_TASK
    assert not (job / "escape.txt").exists()


def test_no_network(conformance):
    _docker_only(conformance)
    _, _, run_dir, _, rows = conformance
    report = json.loads((_out(run_dir, rows, "11_opens_network") / "network.json").read_text())
    assert report["interfaces"] == ["lo"]
    assert report["host_loopback"].startswith("failed")
    assert report["route_off_machine"].startswith("failed")


def test_the_parent_cannot_be_killed(conformance):
    _docker_only(conformance)
    _, _, run_dir, _, rows = conformance
    assert json.loads((_out(run_dir, rows, "12_kills_parent") / "parent.json").read_text()) == {"parent": 1}


def test_memory_limit_ends_as_out_of_memory(conformance):
    _docker_only(conformance)
    _, _, run_dir, _, rows = conformance
    assert "out of memory" in _verdict(run_dir, rows, "13_memory_hog")["message"]
