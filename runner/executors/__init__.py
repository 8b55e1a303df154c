"""Executors: where a worker runs on a job directory. They know nothing about kernels."""

from __future__ import annotations

from runner.executors.base import ExecutionOutcome, Executor, ExecutorSettings
from runner.registry import Registry

EXECUTORS: Registry[type] = Registry("executor")


def _local():
    from runner.executors.local import LocalExecutor

    return LocalExecutor


EXECUTORS.register("local", _local)


def make_executor(kind: str, settings: ExecutorSettings) -> Executor:
    return EXECUTORS.get(kind)(settings)


__all__ = ["EXECUTORS", "ExecutionOutcome", "Executor", "ExecutorSettings", "make_executor"]
