"""Positive controls: honest hand-written Triton kernels for tasks of the project's own suite.

They measure false positives: each must pass the static screen under ``own_kernels`` and end
``correct`` in one real ``kbench run`` (local executor, directory method) on the CPU, where
Triton's interpreter runs the kernels (``TRITON_INTERPRET=1`` passed into the sandbox), with
its own kernels seen running by the kernel census.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.static_check import screen_candidate
from tests.conftest import REPO, kbench, result_records

pytest.importorskip("triton")

CONTROLS_DIR = Path(__file__).parent / "controls"
CONTROLS = sorted(CONTROLS_DIR.glob("*.py"))


def _category(task_id: str) -> str:
    (path,) = (REPO / "tasks").glob(f"*/{task_id}.py")
    return path.parent.name


def test_controls_cover_the_suite_widely():
    assert len(CONTROLS) >= 12
    assert len({_category(p.stem) for p in CONTROLS}) >= 8


@pytest.mark.parametrize("control", CONTROLS, ids=[p.stem for p in CONTROLS])
def test_control_passes_the_static_screen(control):
    report = screen_candidate(control.read_text(), "own_kernels")
    assert report.violation is None and report.kernel_launches >= 1, report.findings


@pytest.fixture(scope="module")
def controls_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controls")
    proc = kbench(
        "run",
        "suite=full",
        f"suite.tasks=[{','.join(p.stem for p in CONTROLS)}]",
        "method=directory",
        f"method.directory.path={CONTROLS_DIR}",
        "tracking=off",
        "executor.env_passthrough=[TRITON_INTERPRET]",
        "run.name=controls",
        # Correctness is the point here; the interpreter's timings would only cost minutes.
        "eval.timing.enabled=false",
        cwd=tmp,
        env={"TRITON_INTERPRET": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    return result_records(run_dir)


@pytest.mark.parametrize("control", CONTROLS, ids=[p.stem for p in CONTROLS])
def test_control_is_correct_and_its_kernels_ran(controls_run, control):
    record = controls_run[control.stem]
    assert record["verdict"]["status"] == "correct", record["verdict"]
    census = record["integrity"]["kernel_census"]
    assert census["instrument"] == "triton_interpreter" and census["own_kernel_ran"] is True, census
    assert set(census["own"]) <= set(census["defined"]) and not census["library"], census
