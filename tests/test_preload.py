"""The reference's kernels loaded before the first shared phase (``runner/worker/preload.py``): the setting reaches
each job, leaves the configuration's identity alone, and without CUDA nothing is captured. What the capture
loads, and that it changes no value, is checked on the GPU (``tests/test_gpu.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from runner.configure import compose_config, hashed_yaml, to_settings
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
