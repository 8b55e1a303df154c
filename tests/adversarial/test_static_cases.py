"""The static corpus: every hostile candidate in ``static_cases/`` is stopped before it runs.

Each file states ``# expect: integrity_violation <reason>`` on its first line; screened under
``own_kernels`` (the policy of the directory and LLM methods), its violation must carry that
reason. Together the cases cover every reason a policy can forbid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.static_check import FORBIDDEN, IntegrityPolicy, screen_candidate
from tests.adversarial.case_runs import expected_verdict

CASES = sorted((Path(__file__).parent / "static_cases").glob("*.py"))


def test_cases_cover_every_forbidden_reason():
    assert len(CASES) >= 10
    assert {expected_verdict(p)[1] for p in CASES} == FORBIDDEN[IntegrityPolicy.own_kernels]


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_static_case_is_stopped_with_its_reason(case):
    verdict, reason = expected_verdict(case)
    report = screen_candidate(case.read_text(), "own_kernels")
    assert verdict == "integrity_violation"
    assert report.violation is not None and report.violation.reason == reason, report.findings
