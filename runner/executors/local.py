"""The local executor: a fresh Python subprocess per evaluation, in its own process group.

Limits: wall time (counted from the moment the worker starts its job, see
``base.wait_for_worker``; the whole process group is killed on timeout, and after every run so
nothing the candidate started outlives it), per-file size (RLIMIT_FSIZE), captured output
(stdout and stderr are drained and kept up to a cap, the rest counted and dropped). The
child's environment is built from a short allow-list: API keys and tokens in the host's
environment never reach candidate code. No network isolation: that needs the docker executor.

Start-up is hidden by spares: with ``prestart=N`` the executor keeps N workers that have
already imported torch (and initialised CUDA) waiting for a job path on stdin. Each process
still serves exactly one evaluation; a spare never runs GPU work before it gets its job. With
``start="fork"`` (the default) the workers are forked from a fork server per device that has
imported torch and the compiler stack once (``fork_server.py``); ``start="exec"`` starts each one
as a fresh interpreter, as does a run whose fork server could not start (the executor's
environment says why).

Bytecode: where the installed torch carries none, the workers keep theirs under the cache folder, compiled
ahead while the fork server imports (``bytecode.py``). The local executor is the host's environment: a candidate
can write these caches as it can write the compile caches.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from runner.executors.base import (
    CUDA_JIT_CACHE_ENV,
    STARTUP_LIMIT_S,
    ExecutionOutcome,
    ExecutorSettings,
    SparePool,
    wait_for_worker,
)
from runner.executors.bytecode import PYCACHE_PREFIX_ENV, bytecode_env, compile_ahead, compiled_ahead_before
from runner.executors.fork_server import ForkedProcess, ForkServer, ForkServerUnavailable
from runner.gpu.lock import work_token
from runner.paths import REPO_ROOT, user_cache_dir
from runner.worker.device_token import PREINIT_ENV, TOKEN_ENV
from runner.worker.protocol import CHECKS_CACHE_ENV, OUT_DIR, SPARE_RECORD_ENV, SPARE_RECORD_FILE, STAGE_FILE

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
_LOGS = ("stdout.log", "stderr.log")


class LocalExecutor:
    name = "local"

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        self._pool = SparePool()  # several evaluations may be in flight (executor.in_flight)
        # Every worker is started from this one long-lived thread: the parent-death signal
        # (``die_with_parent``) fires when the *thread* that started a process ends, and the
        # dispatch threads that ask for workers end before the workers they pre-started do.
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="kbench-spawner")
        self._scratch: Path | None = None
        self._fork_servers: dict[str | None, ForkServer] = {}  # per device; touched by the spawner thread only
        self._fork_failure: str | None = None  # why workers start as fresh interpreters despite start="fork"
        self._server_owner: LocalExecutor = self  # whose fork servers this executor's workers are forked from
        # The bytecode compiled ahead of the fork server's imports (``bytecode.compile_ahead``): the process, and
        # once it has ended, how long it took (seconds, for the record).
        self._compiling: subprocess.Popen | None = None
        self._compiled_in_s: float | None = None
        self._compiled_before = False  # no compile started: an earlier run's went over the same installs

    def borrow_fork_servers(self, owner: LocalExecutor) -> None:
        """Fork this executor's workers from ``owner``'s servers (same environment: the compile warm-up's
        executor borrows the run's, so the imports are paid once per device, not once per executor)."""
        self._server_owner = owner

    def environment(self) -> dict:
        install_cache = self._install_cache_dir()
        env = {
            "kind": "host",
            "executor": "local",
            "python": sys.executable,
            "prestart": self.settings.prestart,
            "start": self.settings.start if self._fork_failure is None else "exec",
            "note": "host environment, not container",
            "bytecode": bytecode_env(install_cache).get(PYCACHE_PREFIX_ENV, "installed"),
            "checks_cache": str(install_cache / "checks"),
        }
        if self._compiling is not None:
            env["bytecode_compiled_ahead_s"] = self._compiled_in_s  # None while it runs
        elif self._compiled_before:
            env["bytecode_compiled_ahead"] = "by an earlier run"
        if self._fork_failure is not None:
            env["fork_server_failed"] = self._fork_failure
        return env

    def own_pids(self) -> set[int]:
        return {sandbox.process.pid for sandbox in self._pool.members()}

    def close(self) -> None:
        if self._compiling is not None and self._compiling.poll() is None:
            kill_group(self._compiling.pid)  # only a cache: what it did not reach compiles on import
            self._compiling.wait()
        spares = self._pool.drain(lambda spare: (spare.home / SPARE_RECORD_FILE, spare.started))
        for spare in spares:  # every one killed before any is waited for: their exits (CUDA contexts) overlap
            spare._kill()
        for spare in spares:
            spare.discard()
        self._spawner.submit(self._close_fork_servers).result()

    def dismissed_spares(self) -> list[dict]:
        return self._pool.dismissed()

    def _close_fork_servers(self) -> None:
        for server in self._fork_servers.values():
            _retire(server)
        self._fork_servers.clear()

    def child_env(self, home: Path, gpu: str | None) -> dict[str, str]:
        env = {key: os.environ[key] for key in _ALLOWED_ENV if key in os.environ}
        env.update({key: os.environ[key] for key in self.settings.env_passthrough if key in os.environ})
        env["HOME"] = str(home)
        env["PYTHONPATH"] = str(REPO_ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONHASHSEED"] = "0"
        cache, install_cache = self._cache_dir(), self._install_cache_dir()
        env.update(bytecode_env(install_cache))
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        # The output checks' kernels, apart from the candidates' and kept from run to run (``_install_cache_dir``).
        env[CHECKS_CACHE_ENV] = str(install_cache / "checks")
        jit_cache = cache / "cuda"  # one for the run's sandboxes, not one per HOME (base.py); made here, as measured
        jit_cache.mkdir(parents=True, exist_ok=True)
        env[CUDA_JIT_CACHE_ENV] = str(jit_cache)
        # One compile thread per sandbox: parallelism comes from the warm-up workers, and a
        # per-process compile pool costs seconds to start even when every kernel is cached.
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(self.settings.compile_threads)
        env["CUDA_VISIBLE_DEVICES"] = gpu if gpu is not None else ""
        env[TOKEN_ENV] = str(work_token(gpu))
        env[SPARE_RECORD_ENV] = str(home / SPARE_RECORD_FILE)
        if gpu is not None:
            env[PREINIT_ENV] = self.settings.cuda_preinit
        return env

    def _install_cache_dir(self) -> Path:
        """Where what depends on the install and the machine, never on a candidate, is kept: the workers' bytecode
        (``pycache/``, ``bytecode.py``) and the output checks' kernels (``checks/``, ``fused_checks.compiled_marker``).
        kbench's folder in the user's cache, shared by the runs on this machine (and, for the bytecode, with the
        run's own process), so a run with a new compile cache does not compile them again: on the H200, ``make
        bench``'s first pass did, and its first measurement came 3.0 s later than the second pass's (10.4 s
        against 7.4 s: the fork server's imports 6.6 s against 4.3 s, the first workers' check kernels compiled
        inside their first shared phase; BENCHMARKS.md, fiftieth session); kept here, 5.9 s (fifty-first, with
        MLflow beside the sweep). The run's cache folder where there is no home. A candidate of the local executor
        runs as the user, as kbench does: it could write any of the user's files, these too; the docker executor
        keeps both in the container."""
        return user_cache_dir() or self._cache_dir()

    def _cache_dir(self) -> Path:
        if self.settings.cache_dir is not None:
            return self.settings.cache_dir
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="kbench-cache-"))
        return self._scratch

    def _new_home(self, prefix: str) -> Path:
        sandboxes = self._cache_dir() / "sandboxes"
        sandboxes.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=sandboxes))

    def _new_sandbox(self, gpu: str | None) -> _Sandbox:
        home = self._new_home("sandbox-")
        return self._spawner.submit(self._start_sandbox, self.child_env(home, gpu), home, gpu).result()

    def _start_sandbox(self, env: dict[str, str], home: Path, gpu: str | None) -> _Sandbox:
        """In the spawner thread: a worker forked from this device's fork server, else a fresh interpreter."""
        server = self._server_for(gpu) if self.settings.start == "fork" and self._fork_failure is None else None
        if server is not None:
            try:
                return _Sandbox(server.spawn(env, home, self.settings.file_size_limit_bytes), home, self.settings)
            except ForkServerUnavailable as exc:
                self._fork_failure = str(exc)
        limit_child = worker_limits(self.settings.file_size_limit_bytes)
        process = subprocess.Popen(
            [sys.executable, "-m", "runner.worker", "--wait"],
            cwd=home,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_child,
        )
        return _Sandbox(process, home, self.settings)

    def _server_for(self, gpu: str | None) -> ForkServer | None:
        owner = self._server_owner
        if owner is self:
            return self._fork_server(gpu)
        # Asked of the owner's spawner thread: only that thread starts or replaces its servers.
        server = owner._spawner.submit(owner._fork_server, gpu).result()
        if server is None:
            self._fork_failure = owner._fork_failure
        return server

    def _fork_server(self, gpu: str | None) -> ForkServer | None:
        """This device's fork server, started on first use (its imports take as long as a fresh worker's)."""
        server = self._fork_servers.pop(gpu, None)
        if server is not None and server.alive():
            self._fork_servers[gpu] = server
            return server
        if server is not None:
            _retire(server)
        home = self._new_home("fork-server-")
        try:
            server = ForkServer(
                self.child_env(home, gpu), home, worker_limits(self.settings.file_size_limit_bytes), STARTUP_LIMIT_S
            )
        except ForkServerUnavailable as exc:
            self._fork_failure = str(exc)  # its log's last line is in the message
            shutil.rmtree(home, ignore_errors=True)
            return None
        self._fork_servers[gpu] = server
        return server

    def prepare(self, gpus: list[str | None]) -> None:
        """Start each device's fork server now (imports only; it never touches a device), so its
        import overlaps the run's own set-up rather than delaying the first evaluation; and, for a run on
        GPUs where the workers keep their own bytecode, compile it ahead of those imports (``bytecode.py``). Not
        on a CPU: there the compile's processes would share the cores with measurements on the host's clock."""
        if self._compiling is None and any(gpu is not None for gpu in gpus):
            self._compiling = compile_ahead(self._install_cache_dir(), preexec_fn=die_with_parent)
            self._compiled_before = self._compiling is None and compiled_ahead_before(self._install_cache_dir())
            if self._compiling is not None:
                threading.Thread(target=self._time_compile, args=(time.perf_counter(),), daemon=True).start()
        if self.settings.start == "fork":
            for gpu in gpus:
                self._spawner.submit(self._fork_server, gpu)

    def _time_compile(self, started: float) -> None:
        self._compiling.wait()
        self._compiled_in_s = round(time.perf_counter() - started, 3)

    def run(self, job_dir: Path, gpu: str | None) -> ExecutionOutcome:
        job_dir = job_dir.resolve()
        sandbox = self._pool.take(gpu, lambda spare: spare.alive())
        # The run's first evaluations on this device (no spare was ever started for it) get their workers
        # first, and the spares are started once one of them has started its job: started together, the
        # spares' CUDA contexts (which the driver makes one after another) and pre-warm delayed the first
        # evaluations' start by seconds (BENCHMARKS.md, thirteenth session). Later, spares are started at once.
        cold = sandbox is None and self._pool.cold(gpu)
        sandbox = sandbox or self._new_sandbox(gpu)

        def refill() -> None:
            # Start the next evaluations' processes now: their imports overlap this one's run.
            self._pool.refill(gpu, self.settings.prestart, self._new_sandbox)

        with self._pool.running(sandbox):
            if not cold:
                began = time.perf_counter()
                refill()
                spares_s = time.perf_counter() - began
                outcome = sandbox.run(job_dir)
                outcome.environment["spares_started_s"] = round(spares_s, 4)  # before the job was handed over
                return outcome
            try:
                return sandbox.run(job_dir, on_started=refill)
            finally:
                if self._pool.cold(gpu):
                    refill()  # its worker never started the job (refused it, died): the spares now


def _retire(server: ForkServer) -> None:
    """Stop a fork server (it kills its workers' groups) and remove its folder."""
    server.close()
    shutil.rmtree(server.home, ignore_errors=True)


def worker_limits(file_limit: int):
    """What a worker process runs before it starts (``preexec_fn``): its limits, and death with the run."""

    def limit_child() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        die_with_parent()

    return limit_child


class _Sandbox:
    """One worker process (a ``Popen`` or a ``ForkedProcess``), started before its job is known and
    waiting for it on stdin."""

    def __init__(self, process, home: Path, settings: ExecutorSettings) -> None:
        self.process, self.home, self.settings = process, home, settings
        # When it was started and (``run``) given its job, epoch seconds; a forked worker's record also says when its
        # server was started and ready, and the imports it did not pay (its server's, once per device): where the
        # sweep's start went (``runner.analysis.duty.sweep_start``).
        if isinstance(process, ForkedProcess):
            server = process.server
            self.started = {
                "started_by": "fork server",
                "fork_server_import_s": server.import_s,
                "fork_server_started": server.started_at,
                "fork_server_ready": server.ready_at,
            }
        else:
            self.started = {"started_by": "fresh interpreter"}
        self.started["process_started"] = time.time()
        self.drains = [
            _Drain(pipe, home / name, settings.output_limit_bytes)
            for pipe, name in zip((self.process.stdout, self.process.stderr), _LOGS)
        ]

    def alive(self) -> bool:
        return self.process.poll() is None

    def discard(self) -> None:
        self._kill()
        self.process.wait()
        self._join_drains()
        shutil.rmtree(self.home, ignore_errors=True)

    def run(self, job_dir: Path, on_started=None) -> ExecutionOutcome:
        started = time.perf_counter()
        self.started["job_given"] = time.time()
        try:
            self.process.stdin.write(f"{job_dir}\n".encode())
            self.process.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died while waiting: the outcome below says how
        try:
            _, timed_out, never_started = wait_for_worker(
                self._wait_until, job_dir / OUT_DIR / STAGE_FILE, started, self.settings, on_started
            )
        finally:
            self._kill()
            self.process.wait()
        self._join_drains()
        out_dir = job_dir / OUT_DIR
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in _LOGS:
            if (self.home / name).exists():
                shutil.move(str(self.home / name), out_dir / name)
        shutil.rmtree(self.home, ignore_errors=True)
        if never_started:
            with open(out_dir / "stderr.log", "ab") as log:
                log.write(
                    f"\nkbench: the worker did not start its job within its start-up limit ({STARTUP_LIMIT_S} s, "
                    "plus the wait for the device while other evaluations used it); killed\n".encode()
                )
        code = self.process.returncode
        return ExecutionOutcome(
            exit_code=code if code is not None and code >= 0 else None,
            signal=-code if code is not None and code < 0 else None,
            timed_out=timed_out,
            wall_s=time.perf_counter() - started,
            stdout_bytes=self.drains[0].total,
            stderr_bytes=self.drains[1].total,
            output_truncated=any(d.total > d.kept for d in self.drains),
            environment=dict(self.started),
        )

    def _kill(self) -> None:
        """SIGKILL to the worker's whole process group, while its group id is still its own."""
        if isinstance(self.process, ForkedProcess):
            self.process.kill_group()  # the server reaps it, so the server must be the one to signal
        else:
            kill_group(self.process.pid)  # not reaped before ``wait`` below

    def _wait_until(self, deadline: float) -> int | None:
        try:
            return self.process.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            return None

    def _join_drains(self) -> None:
        for drain in self.drains:
            # A process that left the group (setsid) may still hold the pipe: do not wait on it.
            drain.join(timeout=5)


def die_with_parent() -> None:
    """Linux: the worker gets SIGKILL when the orchestrator dies (even by SIGKILL)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


def kill_group(pgid: int) -> None:
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
