"""``torch_compile``: the task's Model compiled by torch.compile (inductor writes Triton or C++)."""

from __future__ import annotations

from runner.methods.base import Candidate
from runner.tasks.model import Task

_SUFFIX = """

# --- kbench method: torch_compile (mode={mode!r}) ---
import torch as _kbench_torch


class ModelNew(_kbench_torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.inner = Model(*args)
        # dynamic=False: one specialised graph per shape, as a user benchmarking a fixed shape compiles it.
        self.compiled = _kbench_torch.compile(self.inner, mode={mode!r}, dynamic=False)

    def forward(self, *inputs):
        return self.compiled(*inputs)
"""


def produce(task: Task, options: dict) -> Candidate:
    mode = options.get("compile_mode") or "default"
    return Candidate(
        compiled_source(task.path.read_text(), mode),
        "torch_compile",
        provenance={"compile_mode": mode, "dynamic": False},
    )


def compiled_source(task_source: str, mode: str) -> str:
    """The candidate this method writes for a task file: the file itself, then ``ModelNew`` compiling its Model."""
    return task_source + _SUFFIX.format(mode=mode)


def is_compiled_source(candidate_source: str, task_source: str, provenance: dict) -> bool:
    """Whether a candidate is, character for character, what this method writes for the task file under the
    provenance it was recorded with: kbench's own code, which the worker may load before the device's token
    (``runner/worker/preload.py``) as it does the reference's."""
    mode = provenance.get("compile_mode")
    return isinstance(mode, str) and candidate_source == compiled_source(task_source, mode)
