"""The local executor: a fresh Python subprocess per evaluation, in its own process group.

Limits: wall time (the whole process group is killed on timeout, and after every run so
nothing the candidate started outlives it), per-file size (RLIMIT_FSIZE), captured output
(stdout and stderr are drained and kept up to a cap, the rest counted and dropped). The
child's environment is built from a short allow-list: API keys and tokens in the host's
environment never reach candidate code. No network isolation: that needs the docker executor.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from runner.executors.base import ExecutionOutcome, ExecutorSettings
from runner.paths import REPO_ROOT
from runner.worker.protocol import OUT_DIR

_ALLOWED_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)


class LocalExecutor:
    name = "local"

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings

    def environment(self) -> dict:
        return {
            "kind": "host",
            "executor": "local",
            "python": sys.executable,
            "note": "host environment, not container",
        }

    def close(self) -> None:
        pass

    def child_env(self, job_dir: Path, gpu: str | None) -> dict[str, str]:
        env = {key: os.environ[key] for key in _ALLOWED_ENV if key in os.environ}
        env.update({key: os.environ[key] for key in self.settings.env_passthrough if key in os.environ})
        env["HOME"] = str(job_dir / OUT_DIR / "home")
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONHASHSEED"] = "0"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.settings.cache_dir is not None:
            env["TORCHINDUCTOR_CACHE_DIR"] = str(self.settings.cache_dir / "inductor")
            env["TRITON_CACHE_DIR"] = str(self.settings.cache_dir / "triton")
        env["CUDA_VISIBLE_DEVICES"] = gpu if gpu is not None else ""
        return env

    def run(self, job_dir: Path, gpu: str | None) -> ExecutionOutcome:
        job_dir = job_dir.resolve()
        out_dir = job_dir / OUT_DIR
        (out_dir / "home").mkdir(parents=True, exist_ok=True)
        file_limit = self.settings.file_size_limit_bytes

        def limit_child() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            _die_with_parent()

        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "runner.worker", str(job_dir)],
            cwd=out_dir,
            env=self.child_env(job_dir, gpu),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_child,
        )
        drains = [
            _Drain(process.stdout, out_dir / "stdout.log", self.settings.output_limit_bytes),
            _Drain(process.stderr, out_dir / "stderr.log", self.settings.output_limit_bytes),
        ]
        timed_out = False
        try:
            process.wait(timeout=self.settings.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(process.pid)
            process.wait()
        for drain in drains:
            # A process that left the group (setsid) may still hold the pipe: do not wait on it.
            drain.join(timeout=5)
        code = process.returncode
        return ExecutionOutcome(
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=timed_out,
            wall_s=time.perf_counter() - started,
            stdout_bytes=drains[0].total,
            stderr_bytes=drains[1].total,
            output_truncated=any(d.total > d.kept for d in drains),
        )


def _die_with_parent() -> None:
    """Linux: the worker gets SIGKILL when the orchestrator dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Drain(threading.Thread):
    """Copies a pipe to a file up to ``limit`` bytes and discards (but counts) the rest."""

    def __init__(self, pipe, path: Path, limit: int) -> None:
        super().__init__(daemon=True)
        self.pipe, self.path, self.limit = pipe, path, limit
        self.total = 0
        self.kept = 0
        self.start()

    def run(self) -> None:
        with open(self.path, "wb") as sink:
            while chunk := self.pipe.read(1 << 16):
                self.total += len(chunk)
                room = self.limit - self.kept
                if room > 0:
                    sink.write(chunk[:room])
                    self.kept += min(room, len(chunk))
        self.pipe.close()
