"""``reference``: the task's own Model as the candidate. Speedup should be 1: the sanity check."""

from __future__ import annotations

from runner.methods.base import Candidate
from runner.tasks.model import Task

_SUFFIX = """

# --- kbench method: reference (the task's Model, unchanged) ---
class ModelNew(Model):
    pass
"""


def produce(task: Task, options: dict) -> Candidate:
    return Candidate(task.path.read_text() + _SUFFIX, "reference")
