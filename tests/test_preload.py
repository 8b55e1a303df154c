"""The reference's kernels, and the torch_compile method's own candidate's, loaded before the first shared phase
(``runner/worker/preload.py``): the settings reach each job and leave the configuration's identity alone, without
CUDA nothing is captured, only the method's own text is imported ahead, and the code its first call compiles serves
the correctness stage. What the captures load, and that they change no value or verdict, is checked on the GPU
(``tests/test_gpu.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from runner.configure import compose_config, hashed_yaml, to_settings
from runner.methods.torch_compile import compiled_source, is_compiled_source, produce
from runner.paths import TASKS_DIR
from runner.tasks.model import read_native_task
from runner.worker.loading import build_model, import_file, make_inputs
from runner.worker.precision import Float64Unavailable, float64_calls
from runner.worker.preload import preload_reference_kernels
from tests.conftest import one_task_reference_run


def test_the_setting_is_off_by_default_on_in_h100_fullsuite_and_not_part_of_the_configurations_identity():
    assert to_settings(compose_config([])).preload_kernels is False
    on = compose_config(["experiment=h100_fullsuite"])
    off = compose_config(["experiment=h100_fullsuite", "executor.preload_kernels=false"])
    assert to_settings(on).preload_kernels is True and to_settings(off).preload_kernels is False
    # How a run is driven, not what it measures: a run cut off with it on resumes with it off.
    assert hashed_yaml(on) == hashed_yaml(off)


def test_the_run_writes_the_setting_into_each_job_and_a_cpu_worker_captures_nothing(tmp_path: Path):
    job_dir = one_task_reference_run(tmp_path, "executor.preload_kernels=true")
    job = json.loads((job_dir / "job.json").read_text())
    assert job["preload_kernels"] is True
    result = json.loads((job_dir / "out" / "result.json").read_text())
    assert result["verdict"]["status"] == "correct"
    assert "preloaded_kernels" not in result["environment"]  # a CPU job: no capture tried


def test_without_cuda_the_preload_says_so(tmp_path: Path):
    task = tmp_path / "task.py"
    task.write_text("raise RuntimeError('imported')\n")  # never imported without CUDA
    assert preload_reference_kernels(task, {"small": {"n": 4}}, torch.device("cpu")) == {"not done": "no CUDA device"}


def test_the_float64_calls_are_the_precision_layers():
    """What the preload captures of the float64 layer is the function the reference stage calls: the model
    converted in place and called on the float32 inputs cast; over the budget, unavailable."""
    model = torch.nn.Linear(4, 3)
    inputs = [torch.randn(2, 4)]
    outputs32 = [model(*inputs)]
    answers, strict32 = float64_calls(model, inputs, outputs32, torch.device("cpu"))
    assert answers[0].dtype == torch.float64 and strict32 is None  # no TF32-off call on a CPU
    assert torch.allclose(answers[0].float(), outputs32[0], atol=1e-6)
    with pytest.raises(Float64Unavailable, match="budget of 10"):
        float64_calls(torch.nn.Linear(4, 3), inputs, outputs32, torch.device("cpu"), budget=10)


# -- kbench's own compiled candidate (executor.preload_candidate) ------------------------------------------------


def test_the_candidate_setting_is_off_by_default_on_in_h100_fullsuite_not_part_of_the_identity_and_in_each_job(
    tmp_path: Path,
):
    assert to_settings(compose_config([])).preload_candidate is False
    assert to_settings(compose_config(["experiment=h100_fullsuite"])).preload_candidate is True
    on = compose_config(["executor.preload_candidate=true"])
    assert to_settings(on).preload_candidate is True and hashed_yaml(on) == hashed_yaml(compose_config([]))
    job_dir = one_task_reference_run(tmp_path, "executor.preload_candidate=true")
    assert json.loads((job_dir / "job.json").read_text())["preload_candidate"] is True
    result = json.loads((job_dir / "out" / "result.json").read_text())
    assert result["verdict"]["status"] == "correct"
    assert "preloaded_candidate" not in result["environment"]  # a CPU job: nothing imported ahead


def test_only_the_torch_compile_methods_own_text_for_the_task_is_trusted():
    task = read_native_task(TASKS_DIR / "activation" / "softplus_dt_bias_fp32.py")
    other = (TASKS_DIR / "activation" / "gelu_tanh.py").read_text()
    candidate = produce(task, {})
    text, provenance = candidate.source, candidate.provenance
    assert is_compiled_source(text, task.path.read_text(), provenance)
    assert not is_compiled_source(text + " ", task.path.read_text(), provenance)  # one character more
    assert not is_compiled_source(text.replace("dt_bias", "dt_bias2"), task.path.read_text(), provenance)
    assert not is_compiled_source(text, other, provenance)  # another task's file
    assert not is_compiled_source(text, task.path.read_text(), {})  # no recorded mode: nothing to check against
    assert not is_compiled_source(text, task.path.read_text(), {"compile_mode": "max-autotune"})


def _preload_job(tmp_path: Path, task: str, candidate: str, provenance: dict):
    """The worker's inputs for ``preload_own_candidate`` on this machine's CPU: job, folder, result, screen, cost."""
    from runner.worker import evaluate
    from runner.worker.protocol import Result, Verdict
    from runner.worker.stages import CheckCost

    (tmp_path / "out").mkdir()
    (tmp_path / "task.py").write_text(task)
    (tmp_path / "candidate.py").write_text(candidate)
    job = {
        "check_shapes": ["small"],
        "task": {"shapes": {"small": {"batch": 2, "d_inner": 8, "seqlen": 4}}},
        "trials": 2,
        "integrity_policy": "allow_torch",
        "meta": {"method": "torch_compile", "provenance": provenance},
    }
    result = Result("e1", "t", "sha256:t", "sha256:c", Verdict("correct"), started_at=0.0)
    screened = evaluate._screen(job, tmp_path, result)
    return job, result, screened, CheckCost({}, torch.device("cpu"))


@pytest.mark.parametrize("case", ["own", "edited", "fails_to_import"])
def test_the_worker_imports_ahead_only_the_methods_own_text_and_leaves_a_failure_to_its_stage(tmp_path: Path, case):
    """The gate in the worker (``correctness.preload_own_candidate``), called on this machine's CPU: the method's own
    text is imported (the capture itself needs CUDA and says so); a text that differs is not imported at all; an own
    text whose import fails is put away, for the import stage to fail in its turn with the verdict it gives."""
    from runner.worker.correctness import preload_own_candidate
    from runner.worker.protocol import CANDIDATE_MODULE

    task = (TASKS_DIR / "activation" / "softplus_dt_bias_fp32.py").read_text()
    if case == "fails_to_import":
        task = "raise RuntimeError('the task file fails at import')\n" + task
    candidate = compiled_source(task, "default") + ("x = 1\n" if case == "edited" else "")
    job, result, screened, cost = _preload_job(tmp_path, task, candidate, {"compile_mode": "default"})
    try:
        imported = preload_own_candidate(job, tmp_path, torch.device("cpu"), result, screened, cost)
        record = result.environment["preloaded_candidate"]
        if case == "own":
            assert imported is not None and imported.model_class is sys.modules[CANDIDATE_MODULE].ModelNew
            assert record == {"not done": "no CUDA device"}
        else:
            assert imported is None and CANDIDATE_MODULE not in sys.modules
            why = "not the torch_compile method's text" if case == "edited" else "import: RuntimeError"
            assert record["not done"].startswith(why), record
    finally:
        sys.modules.pop(CANDIDATE_MODULE, None)


@pytest.mark.slow
def test_the_code_compiled_at_the_candidates_first_call_serves_the_instances_the_correctness_stage_builds(
    tmp_path: Path,
):
    """Why the preload pays: torch.compile compiles at a shape's first call (what ``preload._candidate_calls``
    makes, unseeded), and the instance the correctness stage then builds from its seed, on the same module at the
    same shape, is served by the code Dynamo kept: no graph compiled again, and its outputs the reference's.
    Here without a capture, on Inductor's CPU backend; on the GPU the record's ``graphs_compiled_in_correctness``
    says the same of each evaluation (``tests/test_gpu.py``)."""
    from runner.worker.preload import _candidate_calls, dynamo_graphs

    cpu = torch.device("cpu")
    candidate = tmp_path / "candidate.py"
    task_file = TASKS_DIR / "activation" / "softplus_dt_bias_fp32.py"
    candidate.write_text(compiled_source(task_file.read_text(), "default"))
    module = import_file(candidate, "kbench_candidate_compiled_ahead")
    dims = {"batch": 2, "d_inner": 8, "seqlen": 4}
    try:
        with torch.no_grad():
            before = dynamo_graphs()
            _candidate_calls(module, module.ModelNew, dims, cpu)
            compiled = dynamo_graphs()
            assert compiled == before + 1
            inputs = make_inputs(module, dims, cpu, 7)
            outputs = build_model(module.ModelNew, module, dims, cpu, 42)(*inputs)
            assert dynamo_graphs() == compiled
            expected = build_model(module.Model, module, dims, cpu, 42)(*inputs)
        assert torch.allclose(outputs, expected)
    finally:
        sys.modules.pop("kbench_candidate_compiled_ahead", None)


def test_a_failed_captures_record_names_the_error_that_torch_compile_wrapped():
    """torch.compile's ``BackendCompilerFailed`` says only "backend='inductor' raised:" on its first line; the
    record names the innermost error too (on the H200: a copy from host memory, an operation not permitted while
    the stream captures), on one line."""
    from runner.worker.preload import _why

    try:
        try:
            raise RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA graph capture\nmore detail")
        except RuntimeError as inner:
            raise ValueError("backend='inductor' raised:\nRuntimeError: ...") from inner
    except ValueError as outer:
        why = _why(outer)
    assert why == (
        "ValueError: backend='inductor' raised: <- RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA "
        "graph capture"
    )
    assert _why(KeyError("x")) == "KeyError: 'x'"
