"""Every way a candidate can end maps to the right verdict, and the run goes on.

One real ``kbench run`` (local executor, directory method) over a KernelBench-layout folder
whose tasks are all the same small task, with one candidate per way of failing.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.conftest import FAST_TIMING, HONEST_CANDIDATE, kbench, make_kernelbench_dir, results_of, write_candidates

CASES = {
    "1_honest": (HONEST_CANDIDATE, "correct", ""),
    "2_wrong_values": (
        HONEST_CANDIDATE.replace("0.0)", "0.0) * 1.01"),
        "incorrect",
        "mismatch",
    ),
    "3_wrong_dtype": (HONEST_CANDIDATE.replace("0.0)", "0.0).double()"), "incorrect", "mismatch"),
    "4_wrong_shape": (HONEST_CANDIDATE.replace("0.0)", "0.0)[:, :-1]"), "incorrect", "mismatch"),
    "5_syntax_error": ("class ModelNew(:\n    pass\n", "compile_error", "import_failed"),
    "6_no_model_new": ("import torch\nclass Model2: pass\n", "compile_error", "no_model_new"),
    "7_raises": (
        HONEST_CANDIDATE.replace("return torch.clamp_min", "raise RuntimeError('boom'); return torch.clamp_min"),
        "runtime_error",
        "forward_failed",
    ),
    # Hangs after starting a child process: the timeout must kill both.
    "8_hangs": (
        HONEST_CANDIDATE.replace(
            "return torch.clamp_min",
            "import subprocess, time\n        child = subprocess.Popen(['sleep', '3600'])\n"
            "        open('child.pid', 'w').write(str(child.pid))\n        time.sleep(3600)\n        return torch.clamp_min",
        ),
        "timeout",
        "wall_time",
    ),
    "9_segfault": (
        HONEST_CANDIDATE.replace(
            "return torch.clamp_min", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV); return torch.clamp_min"
        ),
        "runtime_error",
        "crashed",
    ),
    "10_exits_quietly": (
        HONEST_CANDIDATE.replace("return torch.clamp_min", "import os; os._exit(0); return torch.clamp_min"),
        "runtime_error",
        "crashed",
    ),
    "11_sys_exit_at_import": ("import sys\nsys.exit(0)\n", "compile_error", "import_failed"),
    # The host's secrets must not reach candidate code: this one fails if it can read one.
    "12_reads_host_secret": (
        HONEST_CANDIDATE.replace(
            "return torch.clamp_min",
            "import os\n        assert 'KBENCH_TEST_SECRET' not in os.environ, 'leaked'\n        return torch.clamp_min",
        ),
        "correct",
        "",
    ),
    # Floods stdout: the capture is capped, the run goes on.
    "13_floods_output": (
        HONEST_CANDIDATE.replace(
            "return torch.clamp_min", "print('x' * (1 << 20), flush=True); return torch.clamp_min"
        ),
        "correct",
        "",
    ),
}


@pytest.fixture(scope="module")
def verdict_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verdicts")
    names = sorted(CASES, key=lambda n: int(n.split("_")[0]))
    suite = make_kernelbench_dir(tmp / "kb", names)
    candidates = write_candidates(tmp / "cands", {name: CASES[name][0] for name in names})
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=directory",
        f"method.directory.path={candidates}",
        "method.directory.integrity_policy=off",  # the sandbox's behaviour is under test, not the screen
        "tracking=off",
        "run.name=verdicts",
        "executor.timeout_s=10",
        "executor.output_limit_mb=1",
        *FAST_TIMING,
        cwd=tmp,
        env={"KBENCH_TEST_SECRET": "hunter2"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    rows = results_of(run_dir)
    return run_dir, {row["task_id"].split("/", 1)[1]: row for row in rows}


@pytest.mark.parametrize("name", sorted(CASES))
def test_verdict(verdict_run, name):
    _, rows = verdict_run
    _, status, reason = CASES[name]
    row = rows[name]
    assert (row["verdict"], row["reason"]) == (status, reason), row


def test_correct_candidate_is_timed(verdict_run):
    _, rows = verdict_run
    row = rows["1_honest"]
    assert row["speedup"] > 0 and row["samples"] >= 5


def test_output_flood_is_capped(verdict_run):
    run_dir, rows = verdict_run
    stdout = run_dir / "jobs" / rows["13_floods_output"]["eval_id"] / "out" / "stdout.log"
    assert stdout.stat().st_size <= 1 << 20
    result = json.loads((stdout.parent / "result.json").read_text())
    assert result["environment"]["sandbox"]["output_truncated"] is True


def test_timeout_leaves_no_process(verdict_run):
    run_dir, rows = verdict_run
    pid_file = run_dir / "jobs" / rows["8_hangs"]["eval_id"] / "out" / "child.pid"
    pid = int(pid_file.read_text())
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
