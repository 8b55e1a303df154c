"""Shared test helpers: run the real ``kbench`` CLI in a subprocess, build KernelBench-style folders.

Nothing here is a mock: runs go through the CLI, the local executor's subprocesses and a
real MLflow SQLite store in a temporary folder. GPU tests are marked ``gpu`` and skipped
where torch sees no CUDA device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """kbench's folder in the user's cache (``runner.paths.user_cache_dir``: bytecode, the check kernels) lies in a
    folder of the session's, so no test reads what an earlier session or a user's run left there, or writes there;
    removed at the end. A test that needs its own sets ``XDG_CACHE_HOME`` itself."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="kbench-test-user-cache-")
    os.environ["XDG_CACHE_HOME"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def run_kernel_script(script: str, device: str, timeout: float) -> str:
    """Run ``script`` (``sys.argv[1]`` is ``device``) in a fresh interpreter and return its stdout; for "cpu"
    under Triton's interpreter, which must be chosen before triton is imported, hence the subprocess."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", script, device], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def prepare_in_own_caches(script: str, tmp_path: Path, *args: str) -> tuple[dict, Path, Path]:
    """Run a check kernels' ``prepare`` script with the checks' cache (``KBENCH_CHECKS_CACHE``) and the
    candidates' Triton cache apart under ``tmp_path``; its last stdout line (JSON) and the two folders."""
    from runner.worker.protocol import CHECKS_CACHE_ENV

    checks, candidates = tmp_path / "checks", tmp_path / "candidates"
    env = dict(os.environ, PYTHONPATH=str(REPO), TRITON_CACHE_DIR=str(candidates))
    env[CHECKS_CACHE_ENV] = str(checks)
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), checks, candidates


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def kbench(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``kbench ARGS`` as a user would, in ``cwd``."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# Short timing for tests that check verdicts and plumbing, not speed.
FAST_TIMING = ("eval.timing.min_samples=5", "eval.timing.time_cap_s=1", "eval.timing.warmup_ms=1")


def processes_under(root: Path) -> list[int]:
    """Live processes whose working folder lies under ``root`` (what a sandbox left behind)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(str(root)):
            found.append(int(pid))
    return found


def results_of(run_dir: Path) -> list[dict]:
    """The rows of a finished run's ``results.jsonl``."""
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def result_records(run_dir: Path) -> dict[str, dict]:
    """Each job's full ``result.json`` (integrity records included), by task id."""
    records = [json.loads(path.read_text()) for path in (run_dir / "jobs").glob("*/out/result.json")]
    return {record["task_id"]: record for record in records}


# A tiny KernelBench-convention task: y = relu(x @ W^T + b) on a 16x32 input.
SMALL_TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    batch_size = 16
    features = 32


    class Model(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.linear = nn.Linear(features, features)

        def forward(self, x):
            return torch.relu(self.linear(x))


    def get_inputs():
        return [torch.randn(batch_size, features)]


    def get_init_inputs():
        return [features]
    """
)

HONEST_CANDIDATE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.linear = nn.Linear(features, features)

        def forward(self, x):
            return torch.clamp_min(x @ self.linear.weight.t() + self.linear.bias, 0.0)
    """
)


def count_host_reads():
    """A torch function mode that counts reads of tensor values back to the host (``.count``); on
    a GPU each one is a synchronisation. Use as ``with count_host_reads() as reads: ...``."""
    from torch.overrides import TorchFunctionMode  # torch only for the tests that use it

    class HostReads(TorchFunctionMode):
        READS = frozenset({"tolist", "item", "__float__", "__int__", "__bool__", "__index__"})

        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.count += getattr(func, "__name__", "") in self.READS
            return func(*args, **(kwargs or {}))

    return HostReads()


def make_kernelbench_dir(root: Path, names: list[str], source: str = SMALL_TASK) -> Path:
    """A KernelBench-layout folder: ``root/level1/<name>.py`` for each name, all the same task."""
    level = root / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for name in names:
        (level / f"{name}.py").write_text(source)
    return root


def reference_and_directory(suite: Path, candidates: Path) -> tuple[str, ...]:
    """``kbench run`` arguments: the reference and the directory method over a KernelBench-layout
    ``suite``, with the static screen off (the sandbox's behaviour is under test, not the screen)."""
    return (
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=[reference,directory]",
        f"method.directory.path={candidates}",
        "method.directory.integrity_policy=off",
    )


def write_candidates(root: Path, candidates: dict[str, str]) -> Path:
    """Candidate files for the directory method: ``root/level1/<name>.py``."""
    level = root / "level1"
    level.mkdir(parents=True, exist_ok=True)
    for name, source in candidates.items():
        (level / f"{name}.py").write_text(textwrap.dedent(source))
    return root


# A task of one scaling op with shapes by ``n``, for evaluations run in the test's own process (``in_process_job``).
DOUBLING_TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2.0

def get_inputs(n):
    return [torch.randn(n)]

def get_init_inputs():
    return []
"""


def one_task_reference_run(tmp_path: Path, *overrides: str) -> Path:
    """``kbench run`` of the reference method over a KernelBench folder of one task (``tracking=off``, fast
    timing, ``overrides``), which must succeed; the job's folder."""
    suite = make_kernelbench_dir(tmp_path / "kb", ["1_only"])
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=reference",
        "tracking=off",
        *overrides,
        *FAST_TIMING,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    (job_dir,) = run_dir.glob("jobs/*")
    return job_dir


# A process that says whether it could take a flock on the file it is given at once.
_TRY_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except BlockingIOError:
    print("held")
"""


def context_lock_free(token: Path) -> bool:
    """Whether another process could take the device's context lock at once (a context made now would not wait)."""
    from runner.worker.device_token import context_lock_of

    out = subprocess.run(
        [sys.executable, "-c", _TRY_LOCK, str(context_lock_of(token))], capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip() == "free"


def executor_switch_result(tmp_path: Path, key: str, flag: str) -> dict:
    """``one_task_reference_run`` with ``executor.KEY=FLAG`` (true or false): its job must say so under ``key`` and its
    evaluation be correct; the result."""
    job_dir = one_task_reference_run(tmp_path, f"executor.{key}={flag}")
    assert json.loads((job_dir / "job.json").read_text())[key] is (flag == "true")
    result = json.loads((job_dir / "out" / "result.json").read_text())
    assert result["verdict"]["status"] == "correct"
    return result


def in_process_job(tmp_path: Path, task: str, candidate: str, task_id: str, shapes: dict, settings) -> dict:
    """A CPU job of ``candidate`` against ``task`` (sources) for ``runner.worker.evaluate.evaluate`` in the
    test's own process: the files in ``tmp_path``, two trials on the ``small`` shape, ``perf`` timed with
    ``settings`` (a ``TimingSettings``)."""
    (tmp_path / "out").mkdir()
    (tmp_path / "task.py").write_text(task)
    (tmp_path / "candidate.py").write_text(candidate)
    return {
        "eval_id": "e1",
        "task": {"task_id": task_id, "content_hash": "sha256:t", "shapes": shapes},
        "candidate_hash": "sha256:c",
        "device": "cpu",
        "seed": 42,
        "trials": 2,
        "check_shapes": ["small"],
        "timed_shape": "perf",
        "timing": settings.__dict__,
        "integrity_policy": "allow_torch",
    }
