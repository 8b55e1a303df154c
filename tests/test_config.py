"""Every config in conf/ composes; mistakes fail at start with one clear line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.configure import ConfigError, compose_config, hardware_for_gpu, to_settings, wrong_gpu
from runner.paths import CONF_DIR
from tests.conftest import kbench

GROUPS = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


GROUP_OPTIONS = [(group, option) for group in GROUPS for option in _options(group)]
# Options that need a value the user must give.
REQUIRED = {
    ("method", "directory"): ["method.directory.path=/tmp"],
    ("suite", "kernelbench"): ["suite.path=/tmp"],
}


def test_every_group_has_options():
    assert set(GROUPS) >= {"hardware", "method", "model", "suite", "executor", "tracking", "experiment"}


@pytest.mark.parametrize(("group", "option"), GROUP_OPTIONS, ids=[f"{g}={o}" for g, o in GROUP_OPTIONS])
def test_every_config_composes(group, option):
    cfg = compose_config([f"{group}={option}", *REQUIRED.get((group, option), [])])
    settings = to_settings(cfg)
    assert settings.methods
    if group == "method":
        assert option in cfg.method


def test_presets_pick_what_they_promise():
    smoke = to_settings(compose_config(["experiment=cpu_smoke"]))
    assert smoke.device == "cpu" and set(smoke.methods) == {"reference", "torch_compile"} and smoke.suite == "quick"
    full = to_settings(compose_config(["experiment=h100_fullsuite"]))
    assert full.device == "cuda" and full.suite == "full" and full.timed_shape == "perf"
    assert set(full.methods) == {"reference", "torch_compile"}
    assert full.in_flight == 8 and full.admit_free_gib == 16  # eight in flight only with the memory admission
    # The noise target and the warm-up the whole-suite repeatability was measured with (BENCHMARKS.md).
    timing = full.timing
    assert (timing["target_noise"], timing["min_time_s"], timing["warmup_ms"]) == (0.002, 0.5, 0)
    assert (timing["batch"], timing["batch_min_ms"]) == (20, 50)  # short calls in longer batches
    assert smoke.timing["batch_min_ms"] == 0  # elsewhere batches of ``batch`` pairs, as before
    assert (full.trials, full.timed_shape_trials) == (5, 2)  # five at the small shape, two at the timed one


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ("hardware.bogus=1", "hardware.bogus"),
        ("+hardware.bogus=1", "bogus"),
        ("+bogus=1", "bogus"),
        ("hardware.device=tpu", "tpu"),
        ("eval.trials=many", "trials"),
        ("eval.timed_shape_trials=0", "eval.timed_shape_trials must be at least 1 (or null), not 0"),
        ("method=refrence", "refrence"),
        ("experiment=nope", "nope"),
        ("method=directory", "path"),
        ("eval.timing.placements=0", "eval.timing.placements must be at least 1, not 0"),
        ("eval.timing.input_sets=-2", "eval.timing.input_sets must be at least 1"),
        ("executor.admit_free_gib=-1", "executor.admit_free_gib must be 0 (off) or more, not -1"),
        ("executor.warmup_cut_in_within=-1", "executor.warmup_cut_in_within must be 0 or more (or null: always)"),
        ("executor.warmup_cut_in_within=soon", "warmup_cut_in_within"),
        ("eval.timing.audit_share=0", "eval.timing.audit_share must be over 0 and at most 1, not 0"),
        ("eval.timing.batch_min_ms=-1", "eval.timing.batch_min_ms must not be negative, not -1"),
        ("eval.timing.audit_share=1.5", "eval.timing.audit_share must be over 0 and at most 1, not 1.5"),
        ("eval.timing.flush_l2_multiple=0", "eval.timing.flush_l2_multiple must be over 0, not 0"),
    ],
)
def test_bad_config_is_one_line(override, fragment):
    with pytest.raises(ConfigError) as info:
        to_settings(compose_config([override]))
    message = str(info.value)
    assert "\n" not in message and fragment in message


def test_cli_bad_value_exits_nonzero_with_one_line(tmp_path: Path):
    proc = kbench("run", "hardware.device=tpu", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbench: ") and "tpu" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_cli_gpu_asked_without_gpu_fails_before_work(tmp_path: Path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = kbench("run", "experiment=h100_fullsuite", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "GPU" in proc.stderr
    assert not (tmp_path / "runs").exists()


def test_every_gpu_of_hardware_gpus_is_checked_before_work(tmp_path: Path):
    """A lane on a GPU that is not there would fail each of its evaluations; the run fails once,
    naming it. GPU 15 is not on this machine (a CPU machine: GPU 0 already is not)."""
    proc = kbench("run", "experiment=h100_fullsuite", "hardware.gpus=[0,15]", "tracking=off", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert re.search(r"asks for GPU (0|15), but none is usable", proc.stderr), proc.stderr
    assert not (tmp_path / "runs").exists()


def test_a_gpu_file_stops_a_run_on_another_gpu():
    """The GPU files name their GPU, and a run on another stops at its start with one line naming the file to use.
    (The readings stand in for NVML's, which this machine has no GPU to give: a test double at that boundary.)"""
    h100 = to_settings(compose_config(["hardware=h100"]))
    assert h100.gpu_name == "H100" and to_settings(compose_config(["hardware=h200"])).gpu_name == "H200"
    assert to_settings(compose_config(["hardware=cpu"])).gpu_name is None
    assert wrong_gpu("h100", "H100", 0, {"name": "NVIDIA H100 80GB HBM3"}) is None
    message = wrong_gpu("h100", "H100", 0, {"name": "NVIDIA H200"})
    assert "\n" not in message and "GPU 0 is NVIDIA H200" in message and "use hardware=h200" in message, message
    other = wrong_gpu("h100", "H100", 1, {"name": "NVIDIA A100-SXM4-80GB"})
    assert "write a hardware file for it" in other and "hardware.gpu_name=null" in other, other
    assert wrong_gpu("h100", None, 0, {"name": "NVIDIA A100-SXM4-80GB"}) is None  # a file that names none: any GPU
    assert hardware_for_gpu("NVIDIA H100 80GB HBM3") == "h100" and hardware_for_gpu("NVIDIA H200") == "h200"
    assert hardware_for_gpu("NVIDIA A100-SXM4-80GB") is None and hardware_for_gpu("") is None


def test_unknown_suite_task_is_one_line(tmp_path: Path):
    proc = kbench("run", "suite.tasks=[no_such_task]", "tracking=off", cwd=tmp_path)
    assert proc.returncode == 2 and "no_such_task" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_bad_shard_stops_the_run_with_one_line_before_anything_is_written(tmp_path: Path):
    proc = kbench("run", "suite=full", "suite.shard=3/2", "tracking=off", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "suite.shard must be K/N with 1 <= K <= N, e.g. 1/2 (got '3/2')" in proc.stderr
    assert not (tmp_path / "runs").exists()
