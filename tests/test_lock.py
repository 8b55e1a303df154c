"""Two kbench processes on one device never measure at the same time (per-device flock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import make_kernelbench_dir


def _intervals(root: Path) -> list[tuple[float, float]]:
    spans = []
    for result in root.glob("runs/*/jobs/*/out/result.json"):
        data = json.loads(result.read_text())
        spans.append((data["started_at"], data["finished_at"]))
    return spans


def test_concurrent_runs_do_not_overlap(tmp_path: Path):
    env = {**os.environ, "KBENCH_LOCK_DIR": str(tmp_path / "locks")}
    processes = []
    for name in ("a", "b"):
        root = tmp_path / name
        make_kernelbench_dir(root / "kb", ["1_x", "2_y", "3_z"])
        args = [
            "run",
            "suite=kernelbench",
            f"suite.path={root / 'kb'}",
            "method=reference",
            "tracking=off",
            f"run.name=lock_{name}",
            "eval.timing.min_samples=20",
            "eval.timing.time_cap_s=2",
        ]
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "runner.cli", *args],
                cwd=root,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    a, b = _intervals(tmp_path / "a"), _intervals(tmp_path / "b")
    assert len(a) == len(b) == 3
    overlaps = [(x, y) for x in a for y in b if x[0] < y[1] and y[0] < x[1]]
    assert not overlaps
