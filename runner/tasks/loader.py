"""Finding tasks on disk: the native layout and the KernelBench directory layout.

Native: ``tasks/<category>/<task_id>.py``. KernelBench: ``<root>/level<N>/<n>_<Name>.py``.
Both yield the same ``Task`` record, read without importing task code.
"""

from __future__ import annotations

from pathlib import Path

from runner.tasks.model import Task, TaskError, read_kernelbench_task, read_native_task


def load_native_tasks(root: Path) -> list[Task]:
    """Every task under ``root``; task ids must be unique across categories."""
    if not root.is_dir():
        raise TaskError(f"task folder {root} does not exist")
    tasks: list[Task] = []
    seen: dict[str, Path] = {}
    for path in sorted(root.glob("*/*.py")):
        if path.name.startswith("_"):
            continue
        task = read_native_task(path)
        if task.task_id in seen:
            raise TaskError(f"task id {task.task_id!r} is defined twice: {seen[task.task_id]} and {path}")
        seen[task.task_id] = path
        tasks.append(task)
    return tasks


def load_kernelbench_tasks(root: Path, levels: list[int] | None = None) -> list[Task]:
    """Every ``level<N>/*.py`` under a KernelBench checkout (or its ``KernelBench/`` folder)."""
    if (root / "KernelBench").is_dir() and not any(root.glob("level*")):
        root = root / "KernelBench"
    level_dirs = sorted(p for p in root.glob("level*") if p.is_dir())
    if not level_dirs:
        raise TaskError(f"{root} has no level*/ folders: not a KernelBench directory")
    tasks: list[Task] = []
    for level_dir in level_dirs:
        task_level = int("".join(ch for ch in level_dir.name if ch.isdigit()) or 0)
        if levels and task_level not in levels:
            continue
        files = sorted(level_dir.glob("*.py"), key=_kernelbench_order)
        tasks.extend(read_kernelbench_task(path, level_dir.name) for path in files)
    return tasks


def _kernelbench_order(path: Path) -> tuple[int, str]:
    number = path.stem.split("_", 1)[0]
    return (int(number) if number.isdigit() else 1 << 30, path.stem)
