"""One evaluation container and its slot: created, started, handed its job, collected, removed.

The slot is a host folder: ``job/`` (a copy of the job's files, mounted read-only at ``/job``),
``job/out/`` (the only writable mount, ``/job/out``) and ``ctl/job``, a FIFO that is the worker's
stdin. The worker starts with ``--wait`` and reads ``/job`` from the FIFO once its job is copied in.
The wall-time limit counts from the moment the worker starts the job (its stage marker appears);
a worker that does not start at all is killed after ``STARTUP_LIMIT_S`` and shows as a harness
failure. Afterwards the regular files of the output folder are moved into the job directory
(links and special files are dropped) and the capped stdout/stderr are written next to them.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
import time
from pathlib import Path

import requests
from docker.errors import APIError, DockerException, NotFound

from runner.executors.base import STARTUP_LIMIT_S, ExecutionOutcome, ExecutorUnavailable, wait_for_worker
from runner.executors.docker_engine import first_line
from runner.worker.device_token import token_files
from runner.worker.protocol import CANDIDATE_FILE, JOB_FILE, OUT_DIR, SPARE_RECORD_FILE, STAGE_FILE, TASK_FILE

# Where a container finds its device's token (the host's file, mounted read-only); its turnstile, ready gate and
# context lock lie beside it.
CONTAINER_TOKEN = "/ctl/device.token"

CONTAINER_UID = 10001  # the image's `kbench` user; used when the host runs as root
COMMAND = ["sh", "-c", "exec python -m runner.worker --wait < /ctl/job"]
_LOGS = ("stdout.log", "stderr.log")


class Container:
    """One container and its slot: started before its job is known, waiting for it on the FIFO."""

    def __init__(self, executor, gpu: str | None) -> None:
        self.executor, self.gpu = executor, gpu
        self.client = executor.client
        self.settings = executor.settings
        self.slot = Path(tempfile.mkdtemp(prefix="slot-", dir=executor.slots_root()))
        self.slot.chmod(0o755)
        (self.slot / "job" / OUT_DIR).mkdir(parents=True)
        (self.slot / "ctl").mkdir()
        for path in token_files(CONTAINER_TOKEN):  # the host's are mounted over them
            (self.slot / "ctl" / path.name).touch(0o444)
        fifo = self.slot / "ctl" / "job"
        os.mkfifo(fifo, 0o600)
        _hand_over(self.slot / "job" / OUT_DIR, 0o700)
        _hand_over(fifo, 0o600)
        # The host holds the FIFO open: the worker's read then blocks until its job is written, and
        # sees end-of-file (and exits) if this process dies first.
        self.fifo = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
        self.container_id: str | None = None
        self.drain: _Drain | None = None
        try:
            container = self.client.containers.create(**executor.container_config(self.slot, gpu))
            self.container_id = container.id
            # Attach before start so that no byte of output is missed; the engine stores none of it.
            stream = self.client.api.attach(container.id, stdout=True, stderr=True, stream=True, demux=True)
            self.drain = _Drain(stream, self.slot, self.settings.output_limit_bytes)
            container.start()
        except (DockerException, requests.exceptions.RequestException) as exc:
            self.discard()
            raise ExecutorUnavailable(f"executor=docker: the engine refused the container: {first_line(exc)}") from None

    def waiting(self) -> bool:
        try:
            state = self.client.api.inspect_container(self.container_id)["State"]
        except (DockerException, requests.exceptions.RequestException):
            return False
        return bool(state.get("Running"))

    def host_pids(self) -> set[int]:
        try:
            top = self.client.api.top(self.container_id)
        except (DockerException, requests.exceptions.RequestException):
            return set()
        column = top["Titles"].index("PID")
        return {int(row[column]) for row in top.get("Processes") or []}

    @property
    def spare_record_file(self) -> Path:
        """Where the worker writes its start's record (``SPARE_RECORD_ENV``: ``/job/out`` inside), on the host."""
        return self.slot / "job" / OUT_DIR / SPARE_RECORD_FILE

    def hand_over(self, job_dir: Path) -> None:
        """Copy the job into the slot and tell the waiting worker where it is; the wall clock starts here."""
        job = self.slot / "job"
        for name in (JOB_FILE, TASK_FILE, CANDIDATE_FILE):
            shutil.copyfile(job_dir / name, job / name)
            (job / name).chmod(0o444)
        self.started = time.perf_counter()
        # The FIFO stays open here until the container is gone: a pipe that nobody holds open loses
        # its data, and a fresh container's shell may not have opened its end yet.
        os.write(self.fifo, b"/job\n")

    def finish(self, job_dir: Path) -> ExecutionOutcome:
        """Wait for the end (kill at the time limit), then bring the outputs and the capped logs home."""
        job = self.slot / "job"
        # The time limit counts from the moment the worker starts the job (its stage marker appears):
        # a slow container start or torch import on a busy host is never a candidate's timeout. If the
        # worker does not even start, the orchestrator sees a harness failure (stage "start").
        marker = job / OUT_DIR / STAGE_FILE
        status, timed_out, never_started = wait_for_worker(self._wait_until, marker, self.started, self.settings)
        if status is None:
            try:
                self.client.api.kill(self.container_id)
            except APIError:
                pass  # it ended between the deadline and the kill
            status = self._wait_until(time.perf_counter() + 60) or {}
        wall = time.perf_counter() - self.started
        state = self.client.api.inspect_container(self.container_id)["State"]
        self.drain.join(timeout=30)
        out_dir = job_dir / OUT_DIR
        out_dir.mkdir(parents=True, exist_ok=True)
        # Its start's record, as a spare (the result's environment keeps the same): the slot's, not an output.
        self.spare_record_file.unlink(missing_ok=True)
        dropped = _move_outputs(job / OUT_DIR, out_dir)
        notes = []
        if state.get("OOMKilled"):
            notes.append(
                f"kbench: the container was killed for running out of memory (limit "
                f"{self.settings.memory_limit_bytes >> 20} MiB)"
            )
        if never_started:
            notes.append(
                f"kbench: the worker did not start its job within its start-up limit ({STARTUP_LIMIT_S} s, plus "
                "the wait for the device while other evaluations used it); killed"
            )
        if dropped:
            notes.append(f"kbench: dropped from the output folder (not regular files): {', '.join(dropped[:20])}")
        for name in _LOGS:
            shutil.move(str(self.slot / name), out_dir / name)
        if notes:
            with open(out_dir / "stderr.log", "ab") as log:
                log.write(("\n" + "\n".join(notes) + "\n").encode())
        _give_back(out_dir)
        code = status.get("StatusCode", state.get("ExitCode"))
        # docker-init exits 128+N when the worker dies of signal N (and a kill on timeout is SIGKILL).
        died_of = code - 128 if code is not None and 128 < code <= 128 + 64 else None
        return ExecutionOutcome(
            exit_code=None if died_of else code,
            signal=died_of,
            timed_out=timed_out,
            wall_s=wall,
            stdout_bytes=self.drain.totals[0],
            stderr_bytes=self.drain.totals[1],
            output_truncated=self.drain.truncated(),
            environment={"container": self.container_id[:12], "oom_killed": bool(state.get("OOMKilled"))},
        )

    def _wait_until(self, deadline: float) -> dict | None:
        """The container's exit status, or None at the deadline. The engine's answer to a request
        timeout differs by transport (a ReadTimeout, or a ConnectionError saying "Read timed out"):
        the clock decides, and an engine that no longer answers a ping is lost."""
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return None
            try:
                return self.client.api.wait(self.container_id, timeout=max(remaining, 0.1))
            except (DockerException, requests.exceptions.RequestException) as exc:
                if time.perf_counter() >= deadline - 0.05:
                    return None
                try:
                    self.client.ping()
                except (DockerException, requests.exceptions.RequestException):
                    raise ExecutorUnavailable(
                        f"executor=docker: lost the engine during an evaluation: {first_line(exc)}"
                    ) from None

    def discard(self) -> None:
        if self.fifo is not None:
            os.close(self.fifo)
            self.fifo = None
        if self.container_id is not None:
            try:
                self.client.api.remove_container(self.container_id, force=True, v=True)
            except NotFound:
                pass
            except (DockerException, requests.exceptions.RequestException) as exc:
                raise ExecutorUnavailable(
                    f"executor=docker: could not remove container {self.container_id[:12]}: {first_line(exc)}"
                ) from None
        if self.drain is not None:
            self.drain.join(timeout=30)
        shutil.rmtree(self.slot, ignore_errors=True)


class _Drain(threading.Thread):
    """Copies a container's stdout and stderr to files up to ``limit`` bytes each; counts the rest."""

    def __init__(self, stream, folder: Path, limit: int) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit = stream, limit
        self.paths = [folder / name for name in _LOGS]
        self.totals = [0, 0]
        self.kept = [0, 0]
        self.start()

    def run(self) -> None:
        sinks = [open(path, "wb") for path in self.paths]
        try:
            for frames in self.stream:
                for index, chunk in enumerate(frames):
                    if not chunk:
                        continue
                    self.totals[index] += len(chunk)
                    room = self.limit - self.kept[index]
                    if room > 0:
                        sinks[index].write(chunk[:room])
                        self.kept[index] += min(room, len(chunk))
        except requests.exceptions.RequestException:
            pass  # the container was removed mid-stream: what arrived is kept
        finally:
            for sink in sinks:
                sink.close()

    def truncated(self) -> bool:
        return any(total > kept for total, kept in zip(self.totals, self.kept))


def _move_outputs(source: Path, target: Path) -> list[str]:
    """Move regular files and folders from the slot's output folder; links, FIFOs and devices are dropped."""
    dropped = []
    for root, dirs, files in os.walk(source):
        relative = Path(root).relative_to(source)
        for name in dirs:
            if os.path.islink(Path(root) / name):
                dropped.append(str(relative / name))
                continue
            (target / relative / name).mkdir(parents=True, exist_ok=True)
        dirs[:] = [name for name in dirs if not os.path.islink(Path(root) / name)]
        for name in files:
            path = Path(root) / name
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.replace(path, target / relative / name)
            else:
                dropped.append(str(relative / name))
    return dropped


def container_user() -> str:
    if os.geteuid() == 0:
        return f"{CONTAINER_UID}:{CONTAINER_UID}"
    return f"{os.geteuid()}:{os.getegid()}"


def _hand_over(path: Path, mode: int) -> None:
    """Make ``path`` the container user's: chown when the host runs as root, else it is already ours."""
    path.chmod(mode)
    if os.geteuid() == 0:
        os.chown(path, CONTAINER_UID, CONTAINER_UID)


def _give_back(folder: Path) -> None:
    """The moved outputs belong to the host user again (they were written by the container's user)."""
    if os.geteuid() != 0:
        return
    for root, _, files in os.walk(folder):
        for name in files:
            os.chown(Path(root) / name, 0, 0)
