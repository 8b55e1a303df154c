"""A worker's device memory given back with the token held (runner/worker/memory_release.py): the setting reaches
each job, the wait follows what was given back, ``runner.bench duty`` sums it per stage. On a GPU the given-back
bytes and the wait are checked in tests/test_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from runner.analysis.duty import duty
from runner.configure import compose_config, hashed_yaml, to_settings
from runner.worker.memory_release import GIB, SCRUB_S_PER_GIB, release_device_memory, scrub_seconds
from tests.conftest import executor_switch_result, one_task_reference_run


def test_the_setting_is_off_by_default_and_not_part_of_the_configurations_identity():
    off = compose_config(["experiment=h100_fullsuite"])
    on = compose_config(["experiment=h100_fullsuite", "executor.release_under_token=true"])
    assert to_settings(on).release_under_token is True and to_settings(off).release_under_token is False
    # How a run is driven, not what it measures: a run cut off with it on resumes with it off.
    assert hashed_yaml(on) == hashed_yaml(off)


def test_the_wait_grows_with_the_memory_given_back():
    # 40 GiB slowed a streaming copy for about 100 ms on the H200: the wait covers it, and nothing given back waits
    # for nothing (a negative difference, another thread's allocation between the readings, neither).
    assert scrub_seconds(40 * GIB) == pytest.approx(40 * SCRUB_S_PER_GIB) and scrub_seconds(40 * GIB) >= 0.1
    assert scrub_seconds(8 * GIB) == pytest.approx(scrub_seconds(40 * GIB) / 5)
    assert scrub_seconds(0) == 0 and scrub_seconds(-GIB) == 0


def test_off_a_gpu_nothing_is_given_back():
    assert release_device_memory(torch.device("cpu"), "end") is None


@pytest.mark.parametrize("flag", ["true", "false"])
def test_the_run_writes_the_setting_into_each_job(tmp_path: Path, flag: str):
    result = executor_switch_result(tmp_path, "release_under_token", flag)
    assert "device_memory_released" not in result["environment"]  # a CPU job: nothing to give back


def test_duty_sums_what_was_given_back_per_stage(tmp_path: Path):
    job_dir = one_task_reference_run(tmp_path)
    run_dir = job_dir.parent.parent
    assert duty(run_dir)["memory_released"] is None  # a CPU run
    path = job_dir / "out" / "result.json"
    result = json.loads(path.read_text())
    result["environment"]["device_memory_released"] = [
        {"stage": "checks", "freed_bytes": 2 * GIB, "settle_s": 0.006, "left_bytes": GIB},
        {"stage": "end", "freed_bytes": 6 * GIB, "settle_s": 0.018, "left_bytes": 0},
        {"stage": "end", "not_released": "RuntimeError: an illegal memory access"},
    ]
    path.chmod(0o644)
    path.write_text(json.dumps(result))
    released = duty(run_dir)["memory_released"]
    assert released == {
        "checks": {"evaluations": 1, "freed_gib": pytest.approx(2.0), "settle_s": pytest.approx(0.006)},
        "end": {"evaluations": 1, "freed_gib": pytest.approx(6.0), "settle_s": pytest.approx(0.018)},
    }
