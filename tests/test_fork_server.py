"""The local executor's fork server: workers forked from it behave as fresh interpreters do.

Real processes throughout: a real server (it imports torch), real forked workers, real runs. The
conformance suite (``tests/conformance/``) runs its hostile candidates through forked workers
(the default) and through fresh interpreters (``executor.start=exec``).
"""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.executors import local
from runner.executors.base import ExecutorSettings
from runner.executors.bytecode import bytecode_env, compile_ahead, compiled_ahead_before, installed_with_bytecode
from runner.executors.fork_server import ForkServer, ForkServerUnavailable
from runner.executors.local import LocalExecutor, worker_limits
from runner.paths import REPO_ROOT
from tests.conftest import (
    FAST_TIMING,
    HONEST_CANDIDATE,
    kbench,
    make_kernelbench_dir,
    processes_under,
    reference_and_directory,
    results_of,
    write_candidates,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "HOME": str(home),
        **extra,
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("server")
    started = ForkServer(_env(home, ONLY_THE_SERVER="1"), home, worker_limits(1 << 30), 300)
    yield started
    started.close()


def _job_dir(tmp_path: Path) -> Path:
    """A job folder with no job file: the worker refuses it with exit code 3 and one line on stderr."""
    job = tmp_path / "job"
    (job / "out").mkdir(parents=True)
    return job


def test_a_forked_worker_takes_its_job_on_stdin_and_reports_how_it_ended(server, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    worker = server.spawn(_env(home), home, 1 << 30)
    assert worker.poll() is None and worker.pid != server.pid
    worker.stdin.write(f"{_job_dir(tmp_path)}\n".encode())
    worker.stdin.close()
    assert worker.wait(60) == 3
    assert b"job.json" in worker.stderr.read()
    assert worker.stdout.read() == b""


def test_a_forked_worker_has_its_own_session_directory_andworker_limits(server, tmp_path: Path):
    """Kernel state a fresh interpreter would have, read from /proc while the worker waits for its job.
    (Its environment is checked from inside a real evaluation: ``test_forked_and_fresh_workers_...``.)"""
    home = tmp_path / "home"
    home.mkdir()
    worker = server.spawn(_env(home), home, 12345 << 10)
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{worker.pid}/cwd").resolve() != home.resolve() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(f"/proc/{worker.pid}/cwd").resolve() == home.resolve()
        assert os.getsid(worker.pid) == worker.pid and os.getpgid(worker.pid) == worker.pid
        limits = Path(f"/proc/{worker.pid}/limits").read_text().splitlines()
        assert str(12345 << 10) in next(line for line in limits if line.startswith("Max file size"))
        assert next(line for line in limits if line.startswith("Max core file size")).split()[4:6] == ["0", "0"]
    finally:
        worker.kill_group()
    assert worker.wait(30) == -signal.SIGKILL


def test_killing_the_server_ends_its_workers(tmp_path: Path):
    home = tmp_path / "server"
    home.mkdir()
    server = ForkServer(_env(home), home, worker_limits(1 << 30), 300)
    worker = server.spawn(_env(home), home, 1 << 30)
    os.kill(server.pid, signal.SIGKILL)
    assert worker.wait(30) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{worker.pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{worker.pid}") or "\nState:\tZ" in Path(f"/proc/{worker.pid}/status").read_text()
    assert not server.alive()
    with pytest.raises(ForkServerUnavailable):
        server.spawn(_env(home), home, 1 << 30)
    server.close()


def test_a_closed_server_exits_without_the_interpreters_teardown(tmp_path: Path):
    """Regression (the H100 machines): the run's close waited its full 10 s for the server's interpreter
    teardown (torch's and the compiler's exit handlers) and then killed it. Here an exit handler that would
    take a minute (``sitecustomize``): the server ends at once, by itself, and the handler never runs."""
    home, site = tmp_path / "server", tmp_path / "site"
    home.mkdir()
    site.mkdir()
    marker = tmp_path / "teardown-ran"
    (site / "sitecustomize.py").write_text(
        f"import atexit, pathlib, time\natexit.register(lambda: (pathlib.Path({str(marker)!r}).touch(), time.sleep(60)))\n"
    )
    server = ForkServer(_env(home, PYTHONPATH=f"{REPO}:{site}"), home, worker_limits(1 << 30), 300)
    worker = server.spawn(_env(home), home, 1 << 30)
    server.close()
    assert server.process.returncode == 0  # not killed at the time limit (-9)
    assert not marker.exists()
    assert worker.wait(30) == -signal.SIGKILL  # its worker went with it


def _unimportable_runner(root: Path) -> str:
    """A PYTHONPATH whose ``runner`` package fails to import: a server started with it cannot start."""
    (root / "runner").mkdir(parents=True)
    (root / "runner" / "__init__.py").write_text('raise ImportError("kbench test: this runner is broken")\n')
    return str(root)


def test_a_server_that_cannot_start_says_why(tmp_path: Path):
    env = _env(tmp_path, PYTHONPATH=_unimportable_runner(tmp_path / "path"))
    with pytest.raises(ForkServerUnavailable, match="did not start.*this runner is broken"):
        ForkServer(env, tmp_path, worker_limits(1 << 30), 60)


def test_the_executor_falls_back_to_fresh_interpreters_and_records_why(tmp_path: Path, monkeypatch):
    """A fork server that fails to start costs the run its speed, never its evaluations. (The failure
    is real: the server is given a PYTHONPATH whose ``runner`` cannot be imported.)"""
    executor = LocalExecutor(ExecutorSettings(timeout_s=60, cache_dir=tmp_path / "cache"))
    real_env = executor.child_env
    broken = _unimportable_runner(tmp_path / "path")

    def broken_for_the_server(home: Path, gpu):
        env = real_env(home, gpu)
        if home.name.startswith("fork-server-"):
            env["PYTHONPATH"] = broken
        return env

    monkeypatch.setattr(executor, "child_env", broken_for_the_server)
    try:
        outcome = executor.run(_job_dir(tmp_path), None)
    finally:
        executor.close()
    assert outcome.exit_code == 3
    assert outcome.environment["started_by"] == "fresh interpreter"
    assert set(outcome.environment) == {"started_by", "process_started", "job_given"}  # no server's times
    assert outcome.environment["process_started"] <= outcome.environment["job_given"]
    recorded = executor.environment()
    assert recorded["start"] == "exec" and "this runner is broken" in recorded["fork_server_failed"]
    assert not list((tmp_path / "cache" / "sandboxes").iterdir())  # the failed server's folder too


# Run at the candidate's import, in the worker: what it can see of its process.
_PROBE = """
import json as _json, os as _os, resource as _resource
with open("probe.json", "w") as _note:
    _json.dump(
        {
            **{key: value for key, value in _os.environ.items()},
            "own_session": _os.getsid(0) == _os.getpid(),
            "file_size_limit": _resource.getrlimit(_resource.RLIMIT_FSIZE)[0],
        },
        _note,
        sort_keys=True,
    )

"""


def _result_environments(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in run_dir.glob("jobs/*/out/result.json"):
        result = json.loads(path.read_text())
        out[f"{result['task_id']}:{result['candidate_hash']}"] = result
    return out


def test_forked_and_fresh_workers_record_the_same_environment_and_verdicts(tmp_path: Path):
    """Two runs of the same evaluations, one per way of starting a worker: the same verdicts, and the
    same worker environment (versions, threads, numerics flags) in every result; only how the
    worker was started differs, and the executor's record says so."""
    names = ["1_a", "2_b"]
    suite = make_kernelbench_dir(tmp_path / "kb", names)
    cands = write_candidates(tmp_path / "cands", {name: _PROBE + HONEST_CANDIDATE for name in names})
    runs, probes = {}, {}
    for start in ("fork", "exec"):
        proc = kbench(
            *reference_and_directory(suite, cands),
            "tracking=off",
            "executor.prestart=1",
            f"executor.start={start}",
            f"run.name={start}",
            *FAST_TIMING,
            cwd=tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (run_dir,) = (tmp_path / "runs").glob(f"*-{start}-*")
        assert all(row["verdict"] == "correct" for row in results_of(run_dir))
        runs[start] = _result_environments(run_dir)
        # The run's own folder (its compile caches) is in some variables: one placeholder for both runs.
        notes = [path.read_text().replace(str(run_dir), "<run>") for path in run_dir.glob("jobs/*/out/probe.json")]
        probes[start] = [json.loads(note) for note in sorted(notes)]
    assert runs["fork"].keys() == runs["exec"].keys() and len(runs["fork"]) == 4
    for key, forked in runs["fork"].items():
        fresh = runs["exec"][key]
        assert forked["environment"]["sandbox"]["started_by"] == "fork server"
        assert forked["environment"]["sandbox"]["fork_server_import_s"] > 0
        assert fresh["environment"]["sandbox"]["started_by"] == "fresh interpreter"
        assert forked["environment"]["executor"]["start"] == "fork"
        assert fresh["environment"]["executor"]["start"] == "exec"
        for field in ("python", "torch", "triton", "torch_threads", "allow_tf32_matmul", "float32_matmul_precision"):
            assert forked["environment"][field] == fresh["environment"][field], field
        # The collector on in the job, what the process made before it frozen, however it was started.
        for started in (forked, fresh):
            collector = started["environment"]["python_gc"]
            assert collector["enabled"] and collector["frozen_objects"] > 10_000, collector
        assert forked["verdict"]["status"] == fresh["verdict"]["status"] == "correct"
    # Seen from inside the candidate: the same environment (HOME aside, a folder per sandbox, and the spare's record
    # in it), its own session, the same file-size limit.
    assert len(probes["fork"]) == len(probes["exec"]) == 2
    for forked, fresh in zip(probes["fork"], probes["exec"]):
        home = forked.pop("HOME")
        assert home != fresh.pop("HOME")
        assert forked.pop("KBENCH_SPARE_RECORD") == f"{home}/spare.json"
        assert fresh.pop("KBENCH_SPARE_RECORD").endswith("/spare.json")
        assert forked == fresh
        assert forked["own_session"] and forked["file_size_limit"] == 2048 << 20
    assert not processes_under(tmp_path)


def test_prepare_starts_the_server_before_any_evaluation(tmp_path: Path):
    """``prepare`` (called by the CLI before the run's own set-up) starts the server in the background
    and returns at once; the first evaluation is forked from that same server."""
    executor = LocalExecutor(ExecutorSettings(timeout_s=60, cache_dir=tmp_path / "cache"))
    try:
        started = time.perf_counter()
        executor.prepare([None])
        assert time.perf_counter() - started < 1.0
        deadline = time.monotonic() + 120
        while not executor._fork_servers and time.monotonic() < deadline:
            time.sleep(0.1)
        (server,) = executor._fork_servers.values()
        assert not executor.own_pids()  # nothing forked yet: the server is not a worker
        outcome = executor.run(_job_dir(tmp_path), None)
        assert outcome.exit_code == 3 and outcome.environment["started_by"] == "fork server"
        assert list(executor._fork_servers.values()) == [server] and server.alive()
    finally:
        executor.close()
    assert not server.alive()


def test_the_sandboxes_share_one_cuda_jit_cache(tmp_path: Path):
    """Kernels the CUDA driver compiles from PTX at their first use are kept where every sandbox of the run
    finds them, not under each sandbox's own HOME (on the GPU: tests/test_gpu.py)."""
    executor = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "cache"))
    first, second = (executor.child_env(tmp_path / home, "0") for home in ("home-a", "home-b"))
    assert first["HOME"] != second["HOME"]
    assert first["CUDA_CACHE_PATH"] == second["CUDA_CACHE_PATH"] == str(tmp_path / "cache" / "cuda")
    assert (tmp_path / "cache" / "cuda").is_dir()  # there before the first sandbox, as on the GPU where it was measured


def _package(site: Path, name: str, compiled: bool) -> None:
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("VALUE = 1\n")
    if compiled:  # as pip installs it by default: the bytecode in __pycache__ beside the source
        source = site / name / "__init__.py"
        py_compile.compile(str(source), cfile=__import__("importlib.util").util.cache_from_source(str(source)))


def test_where_the_install_has_no_bytecode_the_workers_keep_it_under_the_cache(tmp_path: Path, monkeypatch):
    """The H100 machines' torch has no bytecode and their Python writes none (``PYTHONDONTWRITEBYTECODE=1``), so
    each fresh interpreter compiled torch's sources again: 11-16 s of a fork server's start (BENCHMARKS.md,
    twenty-fourth session). There the workers' bytecode goes to the cache folder, is read back by the next
    interpreter, and nothing is written beside the sources."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    monkeypatch.syspath_prepend(str(site))
    env = bytecode_env(cache, "kbench_uncompiled_pkg")
    assert env == {"PYTHONPYCACHEPREFIX": str(cache / "pycache")}
    run_env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), **env}
    command = [sys.executable, "-v", "-c", "import kbench_uncompiled_pkg"]
    first = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr[-2000:]
    (written,) = (cache / "pycache" / site.relative_to("/") / "kbench_uncompiled_pkg").glob("__init__.*.pyc")
    assert not (site / "kbench_uncompiled_pkg" / "__pycache__").exists()
    second = subprocess.run(command, env=run_env, capture_output=True, text=True, timeout=60)
    assert f"code object from '{written}'" in second.stderr  # read, not compiled again


def test_a_run_with_a_new_compile_cache_reads_the_bytecode_an_earlier_runs_workers_compiled(
    tmp_path: Path, monkeypatch
):
    """The workers' bytecode and the output checks' kernels depend on the install, not on a run's candidates: kept in
    kbench's folder of the user's cache, a run with a new compile cache reads them instead of compiling them again
    (``make bench``'s first pass on the H200: the fork server's imports 6.6 s against 4.3 s, its first measurement
    3.0 s later than the second pass's; BENCHMARKS.md, fiftieth session). Without a home, the run's cache holds them.
    The test double: ``kbench_uncompiled_pkg`` stands in for a torch installed without bytecode."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    site = tmp_path / "site"
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    monkeypatch.setattr(local, "bytecode_env", lambda cache: bytecode_env(cache, "kbench_uncompiled_pkg"))
    user = tmp_path / "user" / "kbench"
    command = [sys.executable, "-v", "-c", "import kbench_uncompiled_pkg"]
    logs = []
    for run in ("first", "second"):
        env = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / run)).child_env(tmp_path / f"home-{run}", None)
        assert env["PYTHONPYCACHEPREFIX"] == str(user / "pycache")
        assert env["KBENCH_CHECKS_CACHE"] == str(user / "checks")
        env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
        done = subprocess.run(command, env={**env, "PATH": os.environ["PATH"]}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        logs.append(done.stderr)
    (written,) = (user / "pycache" / site.relative_to("/") / "kbench_uncompiled_pkg").glob("__init__.*.pyc")
    # Compiled by the first run's worker, read by the second's.
    assert [f"code object from '{written}'" in log for log in logs] == [False, True]
    assert (
        not list((tmp_path / "first").rglob("*.pyc")) and not (site / "kbench_uncompiled_pkg" / "__pycache__").exists()
    )
    monkeypatch.setattr(local, "user_cache_dir", lambda: None)  # no home: the run's cache folder holds them
    env = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "third")).child_env(tmp_path / "home-third", None)
    assert env["PYTHONPYCACHEPREFIX"] == str(tmp_path / "third" / "pycache")
    assert env["KBENCH_CHECKS_CACHE"] == str(tmp_path / "third" / "checks")


def test_the_bytecode_is_compiled_ahead_of_the_imports_on_a_cache_still_empty(tmp_path: Path, monkeypatch):
    """A fork server on an empty cache compiled its 2,500 modules one after another, 13.8 s against 3 s from a
    filled cache, and the first evaluations waited for it (BENCHMARKS.md, twenty-eighth session). The packages
    are compiled into the workers' cache beforehand, tests left out, and an interpreter then reads them."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    (site / "kbench_uncompiled_pkg" / "inner.py").write_text("VALUE = 2\n")
    (site / "kbench_uncompiled_pkg" / "tests").mkdir()
    (site / "kbench_uncompiled_pkg" / "tests" / "test_it.py").write_text("VALUE = 3\n")
    monkeypatch.syspath_prepend(str(site))
    process = compile_ahead(cache, ("kbench_uncompiled_pkg", "kbench_no_such_package"), "kbench_uncompiled_pkg")
    assert process is not None and process.wait(timeout=120) == 0
    compiled = cache / "pycache" / site.relative_to("/") / "kbench_uncompiled_pkg"
    assert {path.name.split(".")[0] for path in compiled.glob("*.pyc")} == {"__init__", "inner"}
    assert not (compiled / "tests").exists() and not (site / "kbench_uncompiled_pkg" / "__pycache__").exists()
    own = cache / "pycache" / REPO_ROOT.relative_to("/") / "runner" / "executors"
    assert list(own.glob("bytecode.*.pyc"))  # the worker's own modules too
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), **bytecode_env(cache, "kbench_uncompiled_pkg")}
    read = subprocess.run(
        [sys.executable, "-v", "-c", "import kbench_uncompiled_pkg.inner"], env=env, capture_output=True, text=True
    )
    (inner,) = compiled.glob("inner.*.pyc")
    assert f"code object from '{inner}'" in read.stderr  # read, not compiled on import
    # Marked once done: a later compile over the same installs is not started (with a filled cache it still read
    # every module's header, beside the fork server's imports: fifty-first session); a new install is compiled.
    (marker,) = (cache / "pycache").glob("compiled-ahead-*")
    assert compile_ahead(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg") is None
    assert compiled_ahead_before(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg")
    (site / "kbench_uncompiled_pkg" / "__init__.py").write_text("VALUE = 4\n")  # as an upgrade rewrites it
    (site / "kbench_uncompiled_pkg" / "new.py").write_text("VALUE = 5\n")
    assert not compiled_ahead_before(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg")
    again = compile_ahead(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg")
    assert again is not None and again.wait(timeout=120) == 0
    assert list(compiled.glob("new.*.pyc")) and len(list((cache / "pycache").glob("compiled-ahead-*"))) == 2


def test_nothing_is_compiled_ahead_where_the_install_has_its_bytecode(tmp_path: Path, monkeypatch):
    site = tmp_path / "site"
    _package(site, "kbench_compiled_pkg", compiled=True)
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    monkeypatch.syspath_prepend(str(site))
    assert compile_ahead(tmp_path / "cache", ("kbench_uncompiled_pkg",), "kbench_compiled_pkg") is None
    assert compile_ahead(tmp_path / "cache", ("kbench_compiled_pkg",), "kbench_uncompiled_pkg") is None
    assert not (tmp_path / "cache").exists()


def test_the_executor_compiles_ahead_when_it_prepares_and_records_how_long_it_took(tmp_path: Path, monkeypatch):
    site = tmp_path / "site"
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    monkeypatch.syspath_prepend(str(site))
    real = local.compile_ahead
    monkeypatch.setattr(
        local,
        "compile_ahead",
        lambda cache, preexec_fn: real(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg", preexec_fn),
    )
    monkeypatch.setattr(
        local,
        "compiled_ahead_before",
        lambda cache: compiled_ahead_before(cache, ("kbench_uncompiled_pkg",), "kbench_uncompiled_pkg"),
    )
    on_cpu = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "cpu-cache", start="exec"))
    on_cpu.prepare([None])  # measured on the host's clock: nothing beside it
    assert "bytecode_compiled_ahead_s" not in on_cpu.environment()
    on_cpu.close()
    # A GPU lane (its fork server not started: exec); CUDA is not touched by the compile.
    executor = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "cache", start="exec"))
    try:
        executor.prepare(["0"])
        deadline = time.monotonic() + 120
        while executor.environment()["bytecode_compiled_ahead_s"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert executor.environment()["bytecode_compiled_ahead_s"] > 0
    finally:
        executor.close()
    later = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "cache", start="exec"))
    try:
        later.prepare(["0"])  # the same installs, compiled by the run before: nothing started
        assert later.environment()["bytecode_compiled_ahead"] == "by an earlier run"
        assert "bytecode_compiled_ahead_s" not in later.environment()
    finally:
        later.close()


def test_where_the_install_has_its_bytecode_the_workers_read_it_and_write_none(tmp_path: Path, monkeypatch):
    site = tmp_path / "site"
    _package(site, "kbench_compiled_pkg", compiled=True)
    monkeypatch.syspath_prepend(str(site))
    assert installed_with_bytecode("kbench_compiled_pkg")
    assert bytecode_env(tmp_path / "cache", "kbench_compiled_pkg") == {"PYTHONDONTWRITEBYTECODE": "1"}
    assert installed_with_bytecode("kbench_no_such_package")  # nothing found: nothing to keep


def test_the_workers_environment_follows_how_torch_is_installed(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    executor = LocalExecutor(ExecutorSettings(cache_dir=tmp_path / "cache"))
    env = executor.child_env(tmp_path / "home", None)
    expected = bytecode_env(tmp_path / "user" / "kbench")
    assert {key: env.get(key) for key in expected} == expected
    assert not {"PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX"} - set(expected) & set(env)
    assert executor.environment()["bytecode"] == expected.get("PYTHONPYCACHEPREFIX", "installed")


def _import_with_own_bytecode(site: Path, cache: Path, package: str, **env: str) -> subprocess.CompletedProcess:
    """A fresh interpreter under ``PYTHONDONTWRITEBYTECODE=1`` that calls ``keep_own_bytecode`` for ``package`` and
    then imports it (``-v``: which bytecode it read)."""
    probe = (
        "import sys; from pathlib import Path; from runner.executors.bytecode import keep_own_bytecode; "
        f"print('prefix', keep_own_bytecode(Path(sys.argv[1]), ({package!r},))); import {package}"
    )
    return subprocess.run(
        [sys.executable, "-v", "-c", probe, str(cache)],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{site}:{REPO}", "PYTHONDONTWRITEBYTECODE": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_runs_own_process_keeps_its_bytecode_where_its_packages_have_none(tmp_path: Path):
    """On the H200 machine the run's own imports (Hydra, MLflow and its store's SQLAlchemy and Alembic) had no
    bytecode and its Python wrote none: ``import mlflow`` 2.7-3.6 s and its store 2.3-4.0 s of every set-up
    (BENCHMARKS.md, forty-sixth session). The process's bytecode goes to a cache of its own, read back by the next."""
    site, cache = tmp_path / "site", tmp_path / "cache"
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    first = _import_with_own_bytecode(site, cache, "kbench_uncompiled_pkg")
    assert first.returncode == 0, first.stderr[-2000:]
    assert f"prefix {cache}" in first.stdout
    (written,) = (cache / site.relative_to("/") / "kbench_uncompiled_pkg").glob("__init__.*.pyc")
    assert not (site / "kbench_uncompiled_pkg" / "__pycache__").exists()
    second = _import_with_own_bytecode(site, cache, "kbench_uncompiled_pkg")
    assert f"code object from '{written}'" in second.stderr  # read, not compiled again


def test_the_runs_own_process_reads_the_installs_bytecode_or_the_prefix_it_was_given(tmp_path: Path):
    site, cache = tmp_path / "site", tmp_path / "cache"
    _package(site, "kbench_compiled_pkg", compiled=True)
    installed = _import_with_own_bytecode(site, cache, "kbench_compiled_pkg")
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert "prefix None" in installed.stdout and not cache.exists()
    _package(site, "kbench_uncompiled_pkg", compiled=False)
    given = tmp_path / "given"
    kept = _import_with_own_bytecode(site, cache, "kbench_uncompiled_pkg", PYTHONPYCACHEPREFIX=str(given))
    assert f"prefix {given}" in kept.stdout and not cache.exists()


def test_a_run_whose_configuration_package_has_no_bytecode_keeps_it_in_the_users_cache(tmp_path: Path):
    """End to end, with a real package installed without bytecode: a copy of OmegaConf's sources first on the path.
    The run's process compiles it once into ``$XDG_CACHE_HOME/kbench/pycache`` and the next run reads it; the
    manifest says which bytecode its process used."""
    import omegaconf

    site, home = tmp_path / "site", tmp_path / "xdg"
    shutil.copytree(Path(omegaconf.__file__).parent, site / "omegaconf", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": f"{site}:{REPO}", "PYTHONDONTWRITEBYTECODE": "1", "XDG_CACHE_HOME": str(home)}
    env.pop("PYTHONPYCACHEPREFIX", None)
    args = ("run", "experiment=cpu_smoke", "suite.limit=1", "tracking=off", f"run.out_dir={tmp_path / 'runs'}")
    manifests = []
    for name in ("first", "second"):
        done = kbench(*args, f"run.name={name}", *FAST_TIMING, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        (manifest,) = (tmp_path / "runs").glob(f"*-{name}-*/manifest.json")
        manifests.append(json.loads(manifest.read_text()))
        if name == "first":
            (compiled,) = (home / "kbench" / "pycache" / site.relative_to("/") / "omegaconf").glob("omegaconf.*.pyc")
            first_written = compiled.stat().st_mtime_ns
    assert [m["environment"]["host"]["bytecode"] for m in manifests] == [str(home / "kbench" / "pycache")] * 2
    assert compiled.stat().st_mtime_ns == first_written  # read by the second run, not compiled again
    assert not (site / "omegaconf" / "__pycache__").exists()


_PREPARE_PROBE = """
import json, os, sys
from pathlib import Path
import runner.executors.local as local
seen = []
real_prepare = local.LocalExecutor.prepare
def prepare(self, gpus):
    runs = Path(sys.argv[1]) / "runs"
    seen.append({{
        "orchestrator_imported": "runner.orchestrator" in sys.modules,
        "pandas_imported": "pandas" in sys.modules,
        "torch_imported": "torch" in sys.modules,
        "run_dirs": len(list(runs.glob("*"))) if runs.exists() else 0,
    }})
    return real_prepare(self, gpus)
local.LocalExecutor.prepare = prepare
from runner.cli import main
base = ["run", "experiment=cpu_smoke", "executor=local", "suite.limit=1", "tracking=off", "run.out_dir=runs",
        "eval.timing.min_samples=5", "eval.timing.time_cap_s=1"]
codes = [main(base + extra) for extra in {runs}]
from tests.conftest import processes_under
left = [pid for pid in processes_under(Path(sys.argv[1])) if pid != os.getpid()]
print(json.dumps({{"codes": codes, "seen": seen, "left": left}}))
"""


def _probe_prepare(tmp_path: Path, runs: list[list[str]]) -> dict:
    """``kbench run`` in-process once per item of ``runs`` (its extra overrides), ``LocalExecutor.prepare`` watched:
    what had been imported and how many run folders existed when each run started its executor; the exit codes; the
    processes left at the end in ``tmp_path`` (its fork servers' folders among them), the probe's own apart."""
    done = subprocess.run(
        [sys.executable, "-c", _PREPARE_PROBE.format(runs=repr(runs)), str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_run_command_starts_the_fork_server_before_it_imports_torch(tmp_path: Path):
    """The CLI imported torch for its closing report before it started the fork servers: 5.5 s of set-up on the
    H100 machine before the servers' own imports began (BENCHMARKS.md, twenty-fourth session)."""
    probe = _probe_prepare(tmp_path, [[]])
    assert probe["codes"] == [0] and probe["seen"][0]["torch_imported"] is False


def test_a_run_whose_compile_cache_is_given_starts_its_fork_server_before_the_tasks_and_the_run_directory(
    tmp_path: Path,
):
    """On the H200 machine the sweep's first measurement waited on the fork server's imports (3.7-4.0 s), which began
    only after the tasks, the orchestrator's and the analysis' imports (pandas) and the run directory (BENCHMARKS.md,
    forty-sixth session). With ``executor.compile_cache_dir`` the executor's folders are known from the configuration:
    its server starts before any of that. Without it the caches live in the run directory, so it starts after."""
    probe = _probe_prepare(tmp_path, [[f"executor.compile_cache_dir={tmp_path / 'cc'}"], ["run.name=second"]])
    assert probe["codes"] == [0, 0]
    early, late = probe["seen"]
    assert early == {"orchestrator_imported": False, "pandas_imported": False, "torch_imported": False, "run_dirs": 0}
    assert late["run_dirs"] == 2  # the first run's and this one's, made before its executor
    (first,) = (tmp_path / "runs").glob("*-cpu_smoke-*/manifest.json")
    manifest = json.loads(first.read_text())
    parts, start = manifest["setup_parts_s"], manifest["sweep_start_s"]
    assert "interpreter" not in parts and start["from"] == "sweep start"  # in-process: the process is not the run's
    assert start["fork_server_started"] < -(parts["suite"] + parts["run_dir"])  # before the tasks, from the sweep's


def test_a_run_that_fails_after_its_fork_server_started_stops_it(tmp_path: Path):
    """A user's mistake found after the early start (a task that does not exist) ends with exit code 2 as before, and
    the fork server started for it is stopped and its folder removed, not left to the run's process's end."""
    cache = tmp_path / "cc"
    probe = _probe_prepare(tmp_path, [[f"executor.compile_cache_dir={cache}", "suite.tasks=[no_such_task]"]])
    assert probe["codes"] == [2]
    assert probe["seen"] and probe["seen"][0]["run_dirs"] == 0  # it had started, before the tasks were resolved
    assert probe["left"] == []
    assert not list((cache / "sandboxes").glob("fork-server-*"))
    assert not (tmp_path / "runs").exists()  # nothing of the run was written
