# expect: integrity_violation timed_output_mismatch
# Precomputes, while it is imported, the answer to every input the harness could make from what its
# job file says (the seed, the trials, the shapes: every seed the seeding scheme could derive from
# them), then answers from that table: right on each predicted input without computing anything at
# call time, zeros on any other. Timed inputs drawn after the import are in no table.
import json
from pathlib import Path

import torch
import torch.nn as nn

from runner.worker.loading import build_model, import_file, make_inputs

_JOB_DIR = Path.cwd().parent  # the worker runs in <job>/out
_JOB = json.loads((_JOB_DIR / "job.json").read_text())
_TASK = import_file(_JOB_DIR / "task.py", "kbench_task_predicted")
_DEVICE = torch.device(_JOB["device"])
_SEED = int(_JOB["seed"])


def _fingerprint(x: torch.Tensor) -> bytes:
    return x.detach().cpu().contiguous().numpy().tobytes()


def _predicted_seeds() -> set[int]:
    seeds = set()
    for trial in range(int(_JOB["trials"]) + 2):
        for offset in range(8):
            base = _SEED + 1000 * (trial + 1) + offset
            seeds.update((base, base + 7919))
    for offset in range(8):
        seeds.update((_SEED + offset, _SEED + offset + 7919))
    return seeds


_TABLE: dict[bytes, torch.Tensor] = {}
with torch.no_grad():
    for _dims in _JOB["task"]["shapes"].values():
        _reference = build_model(_TASK.Model, _TASK, _dims, _DEVICE, _SEED)
        for _seed in _predicted_seeds():
            _inputs = make_inputs(_TASK, _dims, _DEVICE, _seed)
            _TABLE[_fingerprint(_inputs[0])] = _reference(*_inputs)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        answer = _TABLE.get(_fingerprint(x))
        if answer is None:
            return torch.zeros(x.shape[0], self.features, device=x.device)
        return answer.clone()
