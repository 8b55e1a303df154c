"""GPU-only: the timing engine on CUDA events, NVML readings in the result. Skipped without a GPU."""

from __future__ import annotations

import json

import pytest

from tests.conftest import kbench

pytestmark = pytest.mark.gpu


def test_reference_on_gpu_is_correct_and_close_to_one(tmp_path):
    proc = kbench(
        "run",
        "hardware=h100",
        "suite=full",
        "suite.tasks=[gelu_tanh,linear_bias_fp16]",
        "method=reference",
        "tracking=off",
        "run.name=gpu_check",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    for job in (run_dir / "jobs").iterdir():
        result = json.loads((job / "out" / "result.json").read_text())
        assert result["verdict"]["status"] == "correct"
        assert result["timing"]["clock"] == "cuda_events" and result["timing"]["cache"] == "cold"
        assert {t["shape"] for t in result["trials"]} == {"small", "perf"}
        assert 0.9 < result["timing"]["speedup"] < 1.1
        assert result["environment"]["gpu_before"]["available"] is True
        assert result["environment"]["gpu_uuid"] if "gpu_uuid" in result["environment"] else True


def test_validator_measures_perf_shapes_on_gpu(tmp_path):
    proc = kbench(
        "tasks", "validate", "--suite", "smoke", "--device", "cuda", "--json", str(tmp_path / "v.json"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    outcomes = json.loads((tmp_path / "v.json").read_text())
    assert all(o["eager_ms"].get("perf", 0) > 0 and o["peak_bytes"] for o in outcomes)
