"""The adversarial corpus: every hostile candidate in ``cases/`` ends as its expected verdict.

Each case file states ``# expect: <verdict> [<reason>]`` on its first line, and may name the
task it replaces on its second, ``# task: <name>`` (a file in ``tasks/``); the others replace
the small task of ``tests/conftest.py``. One real ``kbench run`` (local executor, directory
method) evaluates them all on the CPU; positive controls must stay ``correct``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adversarial.case_runs import expected_verdict, run_cases
from tests.conftest import FAST_TIMING, results_of

CASES_DIR = Path(__file__).parent / "cases"
CASES = sorted(CASES_DIR.glob("*.py"))


def run_corpus(tmp: Path, *overrides: str) -> dict[str, dict]:
    """One real ``kbench run`` over every case; ``{case name: result row}``."""
    # These cases exercise the runtime layer alone: the static screen records its findings but forbids
    # nothing (policy ``off``), so a case need not hide from it. The static layer has its own cases
    # (static_cases/), the kernel census under ``own_kernels`` too (kernel_cases/).
    run_dir = run_cases(tmp, CASES, "off", "corpus", *FAST_TIMING, *overrides)
    return {row["task_id"].split("_", 1)[1]: row for row in results_of(run_dir)}


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    return run_corpus(tmp_path_factory.mktemp("corpus"))


def test_corpus_is_not_trivial():
    assert len(CASES) >= 8 and any(expected_verdict(p)[0] == "correct" for p in CASES)


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_verdict(corpus_run, case):
    row = corpus_run[case.stem]
    assert (row["verdict"], row["reason"]) == expected_verdict(case), row
