"""Pre-started workers and the compile warm-up pass: same verdicts, nothing left behind."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import (
    FAST_TIMING,
    HONEST_CANDIDATE,
    kbench,
    make_kernelbench_dir,
    processes_under,
    results_of,
    write_candidates,
)

NAMES = ["1_a", "2_b", "3_c"]


def test_prestart_and_warmup(tmp_path: Path):
    suite = make_kernelbench_dir(tmp_path / "kb", NAMES)
    cands = write_candidates(tmp_path / "cands", {name: HONEST_CANDIDATE for name in NAMES})
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=[reference,directory]",
        f"method.directory.path={cands}",
        "method.directory.integrity_policy=off",  # the sandbox's behaviour is under test, not the screen
        "tracking=off",
        "executor.prestart=2",
        "executor.warmup_workers=2",
        *FAST_TIMING,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compile warm-up: 3 candidates" in proc.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = results_of(run_dir)
    assert len(rows) == 6 and all(row["verdict"] == "correct" for row in rows)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["warmup_s"] > 0
    assert not (run_dir / "warmup").exists()
    assert not list((run_dir / "cache" / "sandboxes").iterdir())
    assert not processes_under(tmp_path)
