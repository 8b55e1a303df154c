"""The run journal: an append-only JSON-lines file that makes a killed run resumable.

Two events per evaluation: ``result`` once its result file is final, ``logged`` once MLflow
has it (with the child run id). Each line is flushed and fsynced before the next step, so a
SIGKILL at any point leaves at most one torn last line, which is ignored on reading.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class JournalState:
    results: dict[str, dict] = field(default_factory=dict)  # eval_id -> result event
    logged: dict[str, str] = field(default_factory=dict)  # eval_id -> MLflow child run id


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> JournalState:
        state = JournalState()
        if not self.path.exists():
            return state
        for line in self.path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill mid-write
            if event.get("event") == "result":
                state.results[event["eval_id"]] = event
            elif event.get("event") == "logged":
                state.logged[event["eval_id"]] = event["mlflow_run_id"]
        return state

    def append(self, event: dict) -> None:
        self._repair_torn_tail()
        with open(self.path, "a") as handle:
            handle.write(json.dumps(event, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _repair_torn_tail(self) -> None:
        """End a line torn by a kill so that the next event starts on its own line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as handle:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
