"""The task record and how it is read from a file without importing the file.

A native task file holds a literal ``KBENCH = {...}`` dict (category, level, dtype, shapes,
FLOPs and bytes formulas, tolerance, tags) next to the KernelBench-convention code
(``Model``, ``get_inputs``, ``get_init_inputs``). The metadata is read with ``ast`` so that
listing and indexing the suite never executes task code.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from runner.tasks.formulas import FormulaError, check_formula

FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
KNOWN_DTYPES = FLOAT_DTYPES + INT_DTYPES + ("float8_e4m3fn", "float8_e5m2")

# atol, rtol by output dtype; integers and bools are compared exactly.
DEFAULT_TOLERANCE = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}

_REQUIRED_KEYS = {"category", "level", "dtype", "shapes", "flops", "bytes"}
# A contract may let this fraction of elements miss the bound (rounding ties), never more.
MAX_MISMATCH_FRACTION = 0.01
_OPTIONAL_KEYS = {"tolerance", "tags", "source", "description", "window_exception"}


class TaskError(ValueError):
    """A task file that does not follow the convention; the message names the file."""


@dataclass(frozen=True)
class Task:
    """One task: where its code is, its metadata, and its content hash."""

    task_id: str
    path: Path
    category: str
    level: int
    dtype: str
    shapes: dict[str, dict[str, int]]
    flops: str | None
    bytes: str | None
    tolerance: dict[str, float] | None
    tags: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""
    window_exception: str = ""  # why the performance shape may lie outside the eager-time window
    content_hash: str = ""
    layout: str = "native"

    def shape_names(self) -> list[str]:
        return list(self.shapes)

    def to_job(self) -> dict:
        """The part of a job description the worker needs (plain JSON types)."""
        return {
            "task_id": self.task_id,
            "category": self.category,
            "level": self.level,
            "dtype": self.dtype,
            "shapes": self.shapes,
            "tolerance": self.tolerance,
            "flops": self.flops,
            "bytes": self.bytes,
            "content_hash": self.content_hash,
            "layout": self.layout,
        }


def content_hash(path: Path) -> str:
    """The task's version: sha256 of the file's bytes."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def read_native_task(path: Path) -> Task:
    """Read a native task file's metadata (no import) and check it."""
    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    meta = _literal_assignment(tree, "KBENCH", path)
    _check_top_level_names(tree, path)
    _check_meta(meta, path)
    tolerance = meta.get("tolerance")
    return Task(
        task_id=path.stem,
        path=path,
        category=meta["category"],
        level=int(meta["level"]),
        dtype=meta["dtype"],
        shapes={name: dict(dims) for name, dims in meta["shapes"].items()},
        flops=meta["flops"],
        bytes=meta["bytes"],
        tolerance=dict(tolerance) if tolerance else None,
        tags=tuple(meta.get("tags", ())),
        source=meta.get("source", ""),
        window_exception=meta.get("window_exception", ""),
        content_hash=content_hash(path),
    )


def read_kernelbench_task(path: Path, level_dir: str) -> Task:
    """A KernelBench file: its module constants are its one shape, called ``default``."""
    text = path.read_text()
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    _check_top_level_names(tree, path)
    digits = "".join(ch for ch in level_dir if ch.isdigit())
    level = int(digits) if digits else 0
    return Task(
        task_id=f"{level_dir}/{path.stem}",
        path=path,
        category=level_dir,
        level=level,
        dtype="float32",
        shapes={"default": {}},
        flops=None,
        bytes=None,
        tolerance=None,
        tags=("kernelbench",),
        content_hash=content_hash(path),
        layout="kernelbench",
    )


def _literal_assignment(tree: ast.Module, name: str, path: Path) -> dict:
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise TaskError(f"{path}: {name} must be a literal dict") from None
            if not isinstance(value, dict):
                raise TaskError(f"{path}: {name} must be a dict")
            return value
    raise TaskError(f"{path}: no {name} = {{...}} metadata dict")


def _check_top_level_names(tree: ast.Module, path: Path) -> None:
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef))
    }
    missing = {"Model", "get_inputs", "get_init_inputs"} - defined
    if missing:
        raise TaskError(f"{path}: missing {', '.join(sorted(missing))}")


def _check_meta(meta: dict, path: Path) -> None:
    missing = _REQUIRED_KEYS - meta.keys()
    if missing:
        raise TaskError(f"{path}: KBENCH lacks {', '.join(sorted(missing))}")
    unknown = meta.keys() - _REQUIRED_KEYS - _OPTIONAL_KEYS
    if unknown:
        raise TaskError(f"{path}: KBENCH has unknown keys {', '.join(sorted(unknown))}")
    if meta["category"] != path.parent.name:
        raise TaskError(
            f"{path}: category {meta['category']!r} does not match its folder {path.parent.name!r}"
        )
    if meta["dtype"] not in KNOWN_DTYPES:
        raise TaskError(f"{path}: dtype {meta['dtype']!r} is not one of {', '.join(KNOWN_DTYPES)}")
    if meta["level"] not in (1, 2, 3):
        raise TaskError(f"{path}: level must be 1, 2 or 3")
    shapes = meta["shapes"]
    if not isinstance(shapes, dict) or "small" not in shapes or len(shapes) < 2:
        raise TaskError(f"{path}: shapes must name 'small' and at least one performance shape")
    dims = None
    for name, shape in shapes.items():
        if not isinstance(shape, dict) or not all(isinstance(v, int) for v in shape.values()):
            raise TaskError(f"{path}: shape {name!r} must map dimension names to integers")
        if dims is not None and set(shape) != dims:
            raise TaskError(f"{path}: shape {name!r} names other dimensions than the first shape")
        dims = set(shape)
    for key in ("flops", "bytes"):
        try:
            check_formula(str(meta[key]), dims or set())
        except FormulaError as exc:
            raise TaskError(f"{path}: {key}: {exc}") from None
    tolerance = meta.get("tolerance")
    if tolerance is not None and (
        not isinstance(tolerance, dict) or not set(tolerance) <= {"atol", "rtol", "mismatch_fraction"}
    ):
        raise TaskError(f"{path}: tolerance must be a dict with atol, rtol and/or mismatch_fraction")
    if tolerance and not 0 <= tolerance.get("mismatch_fraction", 0) <= MAX_MISMATCH_FRACTION:
        raise TaskError(f"{path}: tolerance mismatch_fraction must lie in [0, {MAX_MISMATCH_FRACTION}]")
