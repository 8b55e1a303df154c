"""What a run's code was where its checkout differs from its commit: the difference as a patch (``source.diff`` in
the run directory, beside the manifest), so that ``<commit>-dirty`` names a tree that can be rebuilt exactly.

The patch covers the paths kbench's own behaviour and its tasks come from (``SOURCE_PATHS``): the changes to tracked
files against ``HEAD`` and the untracked files git does not ignore, as ``git diff --binary`` writes them, so that
``git apply`` at the top of a checkout of the commit gives the tree that ran (paths from the repository's top, also
where kbench's folder lies inside a larger repository). Nothing in the repository is written (no index,
no objects): tracked changes from ``git diff HEAD``, each untracked file from ``git diff --no-index`` against
nothing. Untracked files past ``MAX_UNTRACKED_BYTES`` are listed, not copied.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from runner.paths import REPO_ROOT

SOURCE_DIFF = "source.diff"
# Where kbench's behaviour comes from: its package, configs, tasks, images and how it is installed and run.
SOURCE_PATHS = ("runner", "conf", "tasks", "images", "manifests", "pyproject.toml", "Makefile")
# An untracked file larger than this is named in the record, not copied into the patch (a stray data file, say).
MAX_UNTRACKED_BYTES = 1 << 20
GIT_TIMEOUT_S = 30


@dataclass
class SourceDiff:
    patch: bytes  # empty where the tree is its commit's
    changed: list[str] = field(default_factory=list)  # every path the patch touches, from the repository's top
    too_large: list[str] = field(default_factory=list)  # untracked files left out of the patch for their size

    def record(self) -> dict | None:
        """What the manifest keeps (``environment.host.source_diff``): None for a clean tree (where no patch could be
        taken, the manifest keeps ``source_diff``'s reason instead)."""
        if not self.changed:
            return None
        return {
            "file": SOURCE_DIFF,
            "sha256": hashlib.sha256(self.patch).hexdigest(),
            "files": len(self.changed),
            "left_out_for_size": self.too_large,
        }


def _git(cwd: Path | str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=GIT_TIMEOUT_S)


def source_diff(root: Path = REPO_ROOT) -> SourceDiff | str:
    """The checkout's difference from ``HEAD`` under ``SOURCE_PATHS``; where there is none to take, why, in one line
    (``root`` not a git checkout, as an installed package is; git failing or too slow)."""
    try:
        where = _git(root, "rev-parse", "--verify", "--quiet", "--show-toplevel", "--show-prefix", "HEAD")
        if where.returncode:
            return "not a git checkout"
        top, prefix = where.stdout.decode().split("\n")[:2]
        # Paths from the repository's top, where ``git apply`` takes them (kbench may be a folder inside it).
        paths = [prefix + path for path in SOURCE_PATHS]
        tracked = _git(top, "diff", "--binary", "HEAD", "--", *paths)
        names = _git(top, "diff", "--name-only", "-z", "HEAD", "--", *paths)
        untracked = _git(top, "ls-files", "--others", "--exclude-standard", "-z", "--", *paths)
        failed = next((proc for proc in (tracked, names, untracked) if proc.returncode), None)
        if failed is not None:
            return _failure(failed)
        patch = [tracked.stdout]
        changed = list(filter(None, names.stdout.decode().split("\0")))
        too_large = []
        for name in sorted(filter(None, untracked.stdout.decode().split("\0"))):
            changed.append(name)
            if (Path(top) / name).lstat().st_size > MAX_UNTRACKED_BYTES:
                too_large.append(name)
                continue
            added = _git(top, "diff", "--binary", "--no-index", "--", "/dev/null", name)
            if added.returncode not in (0, 1):  # 1: they differ, as a new file does
                return _failure(added)
            patch.append(added.stdout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git could not tell: {exc}"
    return SourceDiff(b"".join(patch), changed, too_large)


def _failure(proc: subprocess.CompletedProcess) -> str:
    said = proc.stderr.decode(errors="replace").strip().splitlines()
    return f"{' '.join(proc.args[:2])} failed (exit {proc.returncode}): {said[0] if said else 'no message'}"
