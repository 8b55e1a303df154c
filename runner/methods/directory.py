"""``directory``: candidates made elsewhere, ``<path>/<task_id>.py`` each defining ModelNew."""

from __future__ import annotations

from pathlib import Path

from runner.methods.base import Candidate, MethodUnavailable
from runner.tasks.model import Task


def produce(task: Task, options: dict) -> Candidate:
    root = Path(options["path"]).expanduser()
    path = root / f"{task.task_id}.py"
    if not path.is_file():
        raise MethodUnavailable(f"no candidate file {path}")
    return Candidate(path.read_text(), "directory", provenance={"file": str(path.resolve())})
