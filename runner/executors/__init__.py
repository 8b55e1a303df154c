"""Executors: where a worker runs on a job directory. They know nothing about kernels.

``local`` (a fresh subprocess), ``docker`` (a fresh container from a locked image) and ``auto``
(docker where an engine answers and the locked image is present, else local, loudly).
``preflight`` answers which one will run, before any work starts.
"""

from __future__ import annotations

from runner.executors.base import ExecutionOutcome, Executor, ExecutorSettings, ExecutorUnavailable
from runner.registry import Registry

EXECUTORS: Registry[type] = Registry("executor")


def _local():
    from runner.executors.local import LocalExecutor

    return LocalExecutor


def _docker():
    from runner.executors.docker import DockerExecutor

    return DockerExecutor


def _auto():
    from runner.executors.auto import make_auto

    return make_auto


EXECUTORS.register("local", _local)
EXECUTORS.register("docker", _docker)
EXECUTORS.register("auto", _auto)


def make_executor(kind: str, settings: ExecutorSettings) -> Executor:
    return EXECUTORS.get(kind)(settings)


def preflight(kind: str, settings: ExecutorSettings):
    """The executor a run of ``kind`` will use (``auto`` resolved), or ``ExecutorUnavailable`` with one line."""
    from runner.executors.auto import preflight as check

    EXECUTORS.get(kind)  # an unknown name fails here, with "did you mean"
    return check(kind, settings)


__all__ = [
    "EXECUTORS",
    "ExecutionOutcome",
    "Executor",
    "ExecutorSettings",
    "ExecutorUnavailable",
    "make_executor",
    "preflight",
]
