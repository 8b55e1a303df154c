"""Methods: how candidates are produced, one module each behind one lazy registry."""

from __future__ import annotations

from runner.methods.base import Candidate, MethodUnavailable
from runner.registry import Registry

METHODS: Registry = Registry("method")


def _reference():
    from runner.methods.reference import produce

    return produce


def _torch_compile():
    from runner.methods.torch_compile import produce

    return produce


def _directory():
    from runner.methods.directory import produce

    return produce


METHODS.register("reference", _reference)
METHODS.register("torch_compile", _torch_compile)
METHODS.register("directory", _directory)

__all__ = ["METHODS", "Candidate", "MethodUnavailable"]
