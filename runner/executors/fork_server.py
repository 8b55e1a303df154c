"""The local executor's fork server, orchestrator side: start one, ask it for workers, learn how they end.

Why: a fresh worker imports torch and the compiler stack before it can do anything, 11-16 s on
the H100 machines (BENCHMARKS.md, ninth session), so N spares supplied at most ~4N evaluations a
minute and the GPU waited for them. The server (``zygote.py``) pays those imports once per device;
each worker is forked from it before any CUDA call and makes its own CUDA context, so a spare is
ready in the time its context and pre-warm take.

A forked worker gets what a fresh one gets: the same environment (the server starts with exactly
the workers' environment; each child then takes its own, HOME included), the same limits, its own
session and process group, stdin/stdout/stderr pipes to this process, death with the run. What
differs: its modules were imported before its job (as a spare's are), by the server, and its
parent is the server, which reaps it and reports its exit status here (``ForkedProcess``).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from runner.executors.zygote import MAX_MESSAGE

# How long a spawn request may wait for the server's answer (a fork takes milliseconds).
_SPAWN_ANSWER_S = 60.0


class ForkServerUnavailable(RuntimeError):
    """The server did not start, or stopped answering: the executor falls back to fresh interpreters."""


class ForkedProcess:
    """A worker forked by the server: the part of ``subprocess.Popen`` the local executor uses."""

    def __init__(self, server: ForkServer, stdin, stdout, stderr) -> None:
        self.server = server
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.pid: int | None = None
        self.returncode: int | None = None
        self._exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
        return self.returncode

    def kill_group(self) -> None:
        """SIGKILL to its whole process group, through the server (which knows whether it is reaped)."""
        self.server.kill(self)

    def _ended(self, code: int) -> None:
        self.returncode = code
        self._exited.set()


class ForkServer:
    """One server process for one device's workers, and the thread that reads its messages."""

    def __init__(self, env: dict[str, str], home: Path, preexec, start_timeout_s: float) -> None:
        self.home = home
        self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log_path = home / "fork-server.log"
        self.started_at = time.time()  # epoch seconds, as the results' other times: when its interpreter was started
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "runner.executors.zygote", str(theirs.fileno())],
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                preexec_fn=preexec,
            )
        theirs.close()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._pending: dict[int, tuple[ForkedProcess, threading.Event, list]] = {}
        self._children: dict[int, ForkedProcess] = {}
        self._closed = False
        ready = self._first_message(start_timeout_s)
        self.pid, self.import_s = ready["ready"], ready["import_s"]
        self.ready_at = time.time()  # when it could fork its first worker
        self._reader = threading.Thread(target=self._read, name="kbench-fork-server", daemon=True)
        self._reader.start()

    def _first_message(self, timeout_s: float) -> dict:
        self._channel.settimeout(timeout_s)
        try:
            data = self._channel.recv(MAX_MESSAGE)
        except (TimeoutError, OSError) as exc:
            data, why = b"", f"no answer in {timeout_s:.0f} s ({type(exc).__name__})"
        else:
            why = "it exited"
        self._channel.settimeout(None)
        message = json.loads(data) if data else {}
        if "ready" not in message:
            self.close()
            detail = message.get("failed_start") or why
            raise ForkServerUnavailable(f"the fork server did not start: {detail}; {self._log_tail()}")
        return message

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return f"its log ends: {lines[-1][:300]}" if lines else "its log is empty"

    def spawn(self, env: dict[str, str], cwd: Path, file_size_limit: int) -> ForkedProcess:
        """A new worker in ``cwd`` with exactly ``env``, running ``python -m runner.worker --wait``."""
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        process = ForkedProcess(self, open(stdin_w, "wb"), open(out_r, "rb"), open(err_r, "rb"))
        answered, answer = threading.Event(), []
        with self._lock:
            request = next(self._ids)
            self._pending[request] = (process, answered, answer)
        message = {"op": "spawn", "id": request, "env": env, "cwd": str(cwd), "file_size_limit": file_size_limit}
        try:
            socket.send_fds(self._channel, [json.dumps(message).encode()], [stdin_r, out_w, err_w])
            if not answered.wait(_SPAWN_ANSWER_S):
                answer.append(f"no answer in {_SPAWN_ANSWER_S:.0f} s")
        except OSError as exc:
            answer.append(f"the server is gone ({exc})")
        finally:
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)  # the child has its own copies; ours would keep its pipes open
            with self._lock:
                self._pending.pop(request, None)
        if process.pid is None:
            for pipe in (process.stdin, process.stdout, process.stderr):
                pipe.close()
            raise ForkServerUnavailable(f"the fork server could not fork a worker: {answer[0] if answer else '?'}")
        return process

    def kill(self, process: ForkedProcess) -> None:
        if process.returncode is not None or process.pid is None:
            return
        try:
            self._channel.send(json.dumps({"op": "kill", "pid": process.pid}).encode())
        except OSError:
            pass  # the server is gone: ``_read`` kills what it left

    def alive(self) -> bool:
        return not self._closed and self.process.poll() is None

    def close(self) -> None:
        """Stop the server; it kills the process group of every worker it still has."""
        self._closed = True
        try:
            self._channel.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._channel.close()

    def _read(self) -> None:
        while True:
            try:
                data = self._channel.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            self._dispatch(json.loads(data))
        # The server is gone. Its workers died with it (their parent-death signal); what they started
        # may not have: their process groups are killed here, once, as the server would have.
        with self._lock:
            orphans = list(self._children.values())
            self._children.clear()
            self._closed = True
        from runner.executors.local import kill_group  # (local imports this module)

        for process in orphans:
            kill_group(process.pid)
            process._ended(-signal.SIGKILL)

    def _dispatch(self, message: dict) -> None:
        with self._lock:
            if "spawned" in message or "spawn_failed" in message:
                pending = self._pending.get(message.get("spawned", message.get("spawn_failed")))
                if pending is None:
                    return
                process, answered, answer = pending
                if "spawned" in message:
                    process.pid = message["pid"]
                    self._children[process.pid] = process
                else:
                    answer.append(message["error"])
                answered.set()
            elif "exited" in message:
                process = self._children.pop(message["exited"], None)
                if process is not None:
                    process._ended(message["code"])
