"""The kernel census under ``own_kernels``: a candidate whose own kernel never runs is caught at run time.

Each file in ``kernel_cases/`` states ``# expect: <verdict> [<reason>]`` on its first line (per
device where the instruments differ: the interpreter does not see PyTorch's ops, so a decoy kernel
beside PyTorch compute is caught on the GPU only) and passes the static screen under
``own_kernels`` (so only the runtime census can tell). One real ``kbench run`` (local executor,
directory method, the policy of the directory and LLM methods) evaluates them against the small
task; on the CPU Triton's interpreter runs the kernels and the census counts their launches.
``tests/test_gpu.py`` runs the same cases under the CUDA profiler.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.static_check import screen_candidate
from tests.adversarial.case_runs import expected_verdict, run_cases
from tests.conftest import result_records

pytest.importorskip("triton")

CASES = sorted((Path(__file__).parent / "kernel_cases").glob("*.py"))


def run_kernel_cases(tmp: Path, *overrides: str, env: dict | None = None) -> dict[str, dict]:
    """One ``kbench run`` over every case under ``own_kernels``; ``{case name: result.json}``."""
    # The verdicts come from the correctness calls; timing would only cost time.
    run_dir = run_cases(tmp, CASES, "own_kernels", "kernel_cases", "eval.timing.enabled=false", *overrides, env=env)
    return {task_id.split("_", 1)[1]: record for task_id, record in result_records(run_dir).items()}


@pytest.fixture(scope="module")
def kernel_run(tmp_path_factory):
    return run_kernel_cases(
        tmp_path_factory.mktemp("kernel_cases"),
        "executor.env_passthrough=[TRITON_INTERPRET]",
        env={"TRITON_INTERPRET": "1"},
    )


def test_cases_include_a_control_and_a_hostile_case():
    for device in ("cpu", "cuda"):
        verdicts = {expected_verdict(p, device)[0] for p in CASES}
        assert {"correct", "integrity_violation"} <= verdicts, device
    reasons = {expected_verdict(p, "cuda")[1] for p in CASES}
    assert {"no_own_kernel_ran", "library_compute_ran"} <= reasons


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_passes_the_static_screen(case):
    report = screen_candidate(case.read_text(), "own_kernels")
    assert report.violation is None and report.kernel_launches >= 1, report.findings


@pytest.mark.parametrize("case", CASES, ids=[p.stem for p in CASES])
def test_case_verdict_and_census(kernel_run, case):
    record = kernel_run[case.stem]
    verdict = record["verdict"]
    assert (verdict["status"], verdict["reason"]) == expected_verdict(case, "cpu"), verdict
    census = record["integrity"]["kernel_census"]
    assert census["instrument"] == "triton_interpreter" and census["judged"] is True, census
    assert census["call"]["shape"] == "default" and census["call"]["trial"] >= 1
    kinds = census["library_kinds"]
    assert kinds["compute"] is None and not kinds["judged"] and "not visible" in kinds["why"], kinds
    if verdict["status"] == "correct":
        assert census["own"] == dict.fromkeys(census["defined"], 1) and census["own_kernel_ran"] is True
    else:
        assert census["own"] == {} and census["own_kernel_ran"] is False
        assert (
            "_linear_relu_kernel" in verdict["message"]
            and f"shape default, trial {census['call']['trial']}" in verdict["message"]
        )
