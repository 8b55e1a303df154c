"""The run directory: where one ``kbench run`` keeps everything, and how a rerun finds it.

``<out_dir>/<stamp>-<name>-<config hash>/`` holds ``config.yaml`` (resolved), ``manifest.json``,
``candidates/``, ``jobs/<eval_id>/`` and ``journal.jsonl``. With ``run.resume=auto`` the same
command after a kill finds the newest unfinished run of the same configuration and resumes
it; a finished run is never reopened (a rerun then measures afresh in a new directory). An unfinished
run of the same name under another configuration (a changed override, or a kbench that added a
setting) is not resumed either: the new directory says which ones it left (``RunDir.not_resumed``).
A lock on the directory keeps two processes from driving one run.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout

from runner.worker.protocol import write_json_atomic

MANIFEST = "manifest.json"


class RunDirBusy(RuntimeError):
    pass


def config_hash(resolved_yaml: str) -> str:
    return hashlib.sha256(resolved_yaml.encode()).hexdigest()[:10]


@dataclass
class RunDir:
    path: Path
    resumed: bool
    lock: FileLock
    # Unfinished runs of the same name under another configuration, newest first (a new run was made instead).
    not_resumed: list[Path] = field(default_factory=list)

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def read_manifest(self) -> dict:
        if self.manifest_path.exists():
            return json.loads(self.manifest_path.read_text())
        return {}

    def write_manifest(self, manifest: dict) -> None:
        write_json_atomic(self.manifest_path, manifest)

    def release(self) -> None:
        self.lock.release()


def open_run_dir(out_dir: Path, name: str, cfg_hash: str, resume: bool) -> RunDir:
    out_dir.mkdir(parents=True, exist_ok=True)
    not_resumed = []
    if resume:
        # <stamp>[.<n>]-<name>-<hash>: this name exactly (not another that ends with it), any configuration.
        folder = re.compile(rf"\d{{8}}-\d{{6}}(\.\d+)?-{re.escape(name)}-(?P<hash>[0-9a-f]+)")
        for candidate in sorted(out_dir.iterdir(), reverse=True):
            match = folder.fullmatch(candidate.name)
            if match is None or not candidate.is_dir() or is_finished(candidate):
                continue
            other_hash = match["hash"]
            if other_hash == cfg_hash:
                return RunDir(candidate, True, _lock(candidate))
            not_resumed.append(candidate)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = out_dir / f"{stamp}-{name}-{cfg_hash}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = out_dir / f"{stamp}.{suffix}-{name}-{cfg_hash}"
    path.mkdir(parents=True)
    return RunDir(path, False, _lock(path), not_resumed)


def is_finished(run_dir: Path) -> bool:
    """Whether the run says it finished; one whose manifest is missing or cannot be read has not."""
    try:
        return json.loads((run_dir / MANIFEST).read_text()).get("status") == "finished"
    except (OSError, ValueError, AttributeError):
        return False


def _lock(path: Path) -> FileLock:
    lock = FileLock(str(path / ".lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunDirBusy(f"run directory {path} is in use by another kbench process") from None
    return lock


def tail_text(path: Path, limit: int = 1500) -> str:
    """The last ``limit`` bytes of the text file at ``path``, stripped (empty where it is missing)."""
    if not path.exists():
        return ""
    data = path.read_bytes()[-limit:]
    return data.decode(errors="replace").strip()
