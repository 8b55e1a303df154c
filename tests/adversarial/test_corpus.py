"""The adversarial corpus: every hostile candidate in ``cases/`` ends as its expected verdict.

Each case file states ``# expect: <verdict> [<reason>]`` on its first line, and may name the
task it replaces on its second, ``# task: <name>`` (a file in ``tasks/``); the others replace
the small task of ``tests/conftest.py``. One real ``kbench run`` (local executor, directory
method) evaluates them all on the CPU; positive controls must stay ``correct``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FAST_TIMING, SMALL_TASK, kbench, make_kernelbench_dir, results_of

CASES_DIR = Path(__file__).parent / "cases"
CASES = sorted(CASES_DIR.glob("*.py"))
TASKS_DIR = Path(__file__).parent / "tasks"


def _expected(path: Path) -> tuple[str, str]:
    words = path.read_text().splitlines()[0].removeprefix("# expect:").split()
    return words[0], words[1] if len(words) > 1 else ""


def _task_source(path: Path) -> str:
    lines = path.read_text().splitlines()
    if len(lines) > 1 and lines[1].startswith("# task:"):
        return (TASKS_DIR / f"{lines[1].removeprefix('# task:').strip()}.py").read_text()
    return SMALL_TASK


def run_corpus(tmp: Path, *overrides: str) -> dict[str, dict]:
    """One real ``kbench run`` over every case; ``{case name: result row}``."""
    names = [f"{i}_{path.stem}" for i, path in enumerate(CASES, 1)]
    suite = tmp / "kb"
    for name, path in zip(names, CASES):
        make_kernelbench_dir(suite, [name], _task_source(path))
    cands = tmp / "cands" / "level1"
    cands.mkdir(parents=True)
    for name, path in zip(names, CASES):
        (cands / f"{name}.py").write_text(path.read_text())
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=directory",
        f"method.directory.path={tmp / 'cands'}",
        # These cases exercise the runtime layer; the static layer has its own cases (static_cases/).
        "method.directory.integrity_policy=allow_torch",
        "tracking=off",
        "run.name=corpus",
        *FAST_TIMING,
        *overrides,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    rows = results_of(run_dir)
    return {row["task_id"].split("_", 1)[1]: row for row in rows}


def expected_verdict(path: Path) -> tuple[str, str]:
    return _expected(path)


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    return run_corpus(tmp_path_factory.mktemp("corpus"))


def test_corpus_is_not_trivial():
    assert len(CASES) >= 8 and any(_expected(p)[0] == "correct" for p in CASES)


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_verdict(corpus_run, case):
    row = corpus_run[case.stem]
    assert (row["verdict"], row["reason"]) == _expected(case), row
