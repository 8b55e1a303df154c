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
        task.path.read_text() + _SUFFIX.format(mode=mode),
        "torch_compile",
        provenance={"compile_mode": mode, "dynamic": False},
    )
