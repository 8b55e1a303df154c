"""The fork server's own process (``python -m runner.executors.zygote FD``): imports once, forks workers.

Started by ``fork_server.ForkServer`` for the local executor, one per device, with the same
scrubbed environment its workers get. It imports torch, the compiler stack and the worker's
modules (11-16 s in a fresh process on the H100 machines), never initialises CUDA (a CUDA
context does not survive a fork), and then forks one worker per request: the child takes the
pipes it was sent as stdin, stdout and stderr, starts its own session, takes the request's
limits, directory and environment, and runs the worker's ``--wait`` entry point exactly as a
fresh ``python -m runner.worker --wait`` would, making its own CUDA context.

It owns the reaping of its children: when one exits, the rest of its process group is killed
before the exit status is reaped and reported, so nothing a candidate started outlives it and a
process-group id is never signalled after it could have been reused. A ``kill`` request is
honoured only for a child not yet reaped, for the same reason.

Messages are JSON, one per datagram of a ``SOCK_SEQPACKET`` socket; a spawn request carries its
three descriptors alongside (``SCM_RIGHTS``). The server exits, killing every child's group, when
the socket closes.
"""

from __future__ import annotations

import gc
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback

MAX_MESSAGE = 1 << 20


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    # The collector paused while the imports make their objects, which are then frozen (``gc.freeze``, as
    # Python's documentation advises before forking): a child's collections never scan or touch them, so
    # they stay shared with the server, and a full collection in a worker costs what the worker itself
    # made, not the ~200,000 objects of torch's stack (85 ms each, this machine).
    gc.disable()
    channel = socket.socket(fileno=int(argv[0]))
    # Asked during the imports whether CUDA is there, torch answers from NVML with this set, not
    # from the CUDA runtime, which would initialise the driver in this process and mark every child
    # a "bad fork" that may not use CUDA. Removed after: the workers get their own environment.
    os.environ[_NVML_CHECK] = "1"
    preload()
    del os.environ[_NVML_CHECK]
    import torch

    gc.freeze()
    why = _why_children_cannot_use_cuda(torch)
    if why:
        _send(channel, {"failed_start": why})
        return 1
    _send(channel, {"ready": os.getpid(), "import_s": round(time.perf_counter() - started, 3)})
    return _serve(channel)


_NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def preload() -> None:
    """The worker's imports, paid once here (the same ones a spare makes before its job). torch.compile's stack
    is among them even for a run of eager candidates only: the kernel census's profiler imports it on a GPU (about
    900 modules), and a job that paid that import in its correctness stage held the device's token for seconds
    (a full reference pass without it: cohort gaps of 6-7 s instead of 0.8; BENCHMARKS.md, twenty-third session).
    Triton's source key is hashed in a thread beside them (``prewarm.triton_key_beside``), which ends before this
    returns: no thread runs when the server forks."""
    import torch  # noqa: F401

    from runner.worker.prewarm import prewarm_compiler, triton_key_beside

    triton_key = triton_key_beside()  # hashed beside the imports below; joined before any fork
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    import runner.worker.evaluate  # noqa: F401
    from runner.executors.local import worker_limits  # noqa: F401 (imported now, not in each child)

    if triton_key is not None:
        triton_key.join()
    prewarm_compiler(None)  # host-only steps: the compiler's modules and torch's source key


def _why_children_cannot_use_cuda(torch) -> str | None:
    """None if a child forked now may make its own CUDA context; else why not. Asked of a real
    child: torch marks its children when this process touched the CUDA runtime (even only to
    count devices), which a flag of this process does not show."""
    if torch.cuda.is_initialized():
        return "CUDA was initialised in the server while importing"
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 3:
        return "the server's imports touched the CUDA runtime, so torch refuses CUDA in its forked children"
    return None if code == 0 else f"a probe child forked from the server ended with {code}"


def _serve(channel: socket.socket) -> int:
    from runner.executors.local import kill_group

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # the handler only has to exist: the wakeup fd does the work
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    own = (channel.fileno(), wake_read, wake_write, selector.fileno())
    children: set[int] = set()
    while True:
        for key, _ in selector.select():
            if key.fileobj is channel:
                data, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 3)
                if not data:
                    for pid in children:
                        kill_group(pid)
                    # No interpreter teardown (torch's and the compiler's exit handlers): on the H100 machines the
                    # run's close waited its full 10 s for it and then killed the server (BENCHMARKS.md,
                    # twenty-third session). Nothing here needs it: the log is flushed, the children are gone.
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(0)
                _handle(channel, json.loads(data), fds, children, own)
            else:
                os.read(wake_read, 4096)
        _reap(channel, children)


def _handle(channel: socket.socket, message: dict, fds: list[int], children: set[int], own: tuple) -> None:
    from runner.executors.local import kill_group  # (not at the top: local imports this module's neighbour)

    if message.get("op") == "kill":
        if message["pid"] in children:  # not yet reaped: its group id cannot have been reused
            kill_group(message["pid"])
        return
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        _send(channel, {"spawn_failed": message["id"], "error": f"expected 3 descriptors, got {len(fds)}"})
        return
    server = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        _send(channel, {"spawn_failed": message["id"], "error": f"fork: {exc}"})
        return
    if pid == 0:
        _become_worker(message, fds, own, server)  # never returns
    for fd in fds:
        os.close(fd)
    children.add(pid)
    _send(channel, {"spawned": message["id"], "pid": pid})


def _reap(channel: socket.socket, children: set[int]) -> None:
    """Every child that has exited: kill what is left of its group, then reap it and report how it ended."""
    from runner.executors.local import kill_group

    while children:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == 0:
            return
        pid = info.si_pid
        kill_group(pid)  # the leader is a zombie until reaped, so its group id is still its own
        _, status = os.waitpid(pid, 0)
        children.discard(pid)
        _send(channel, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _become_worker(message: dict, fds: list[int], own: tuple, server: int) -> None:
    """In the forked child: become what ``python -m runner.worker --wait`` would be, then exit."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in own:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.setsid()
        _limit(message["file_size_limit"], server)
        os.chdir(message["cwd"])
        os.environ.clear()
        os.environ.update(message["env"])
        gc.enable()  # as a fresh interpreter has it; what the server imported stays frozen
        sys.argv = [sys.argv[0], "--wait"]
        from runner.worker.evaluate import main as worker_main

        code = worker_main(["--wait"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _limit(file_size_limit: int, server: int) -> None:
    """The limits a fresh worker gets (``local.worker_limits``), and death with the server (which dies with the run)."""
    from runner.executors.local import worker_limits

    worker_limits(file_size_limit)()
    if os.getppid() != server:  # the server died before the signal was armed
        os._exit(1)


def _send(channel: socket.socket, message: dict) -> None:
    channel.send(json.dumps(message).encode())  # one datagram: SOCK_SEQPACKET never splits it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
