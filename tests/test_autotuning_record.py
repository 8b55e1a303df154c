"""``result.autotuning``: which configs the candidate's autotuned kernels ran (``runner/worker/autotuning.py``), and
``runner.bench repeat`` saying whether two runs' candidates ran theirs alike.

Inductor's kernels here are real ``CachingAutotuner`` objects made by torch's own code on the CPU, in modules loaded
by torch's own ``PyCodeCache``, their choices looked up in a compile cache written by torch's own ``AutotuneCache``.
What only a GPU does (compiling a config into a launcher, timing the configs, Triton's autotuner choosing) runs in
``tests/test_gpu.py::test_the_result_names_the_configs_the_candidates_autotuned_kernels_ran``. One test here stands a
launcher in for a compiled GPU binary (``_LauncherDouble``, named as the test double it is) to leave an autotuner as
timing configs on a GPU leaves it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from runner.analysis.autotune import kernels_alike, kernels_differing, ran_configs
from runner.analysis.repeatability import repeat
from runner.tracking.child_record import child_record
from runner.worker.autotuning import autotuning_record, config_dict, inductor_kernels, triton_autotuners
from runner.worker.evaluate import evaluate
from runner.worker.loading import import_file
from runner.worker.protocol import TimingSettings
from tests.conftest import DOUBLING_TASK, in_process_job
from tests.test_bench import two_passes  # noqa: F401  (the fixture: two real CPU runs)

triton = pytest.importorskip("triton")

_KERNEL = """
import triton
import triton.language as tl


@triton.jit
def {name}(in_ptr, out_ptr, xnumel, XBLOCK: tl.constexpr):
    offsets = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr + offsets, tl.load(in_ptr + offsets, mask=offsets < xnumel) * {factor}, mask=offsets < xnumel)
"""


def _inductor_kernel(name: str, factor: int, blocks: list[int], chosen: int | None):
    """A kernel module as Inductor loads one (``PyCodeCache``), holding its ``CachingAutotuner`` under the kernel's
    name; where ``chosen`` is given, an earlier process's choice is in the compile cache (``AutotuneCache.save``)."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.runtime.hints import DeviceProperties, HeuristicType
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner, check_autotune_cache

    module = PyCodeCache.load(_KERNEL.format(name=name, factor=factor))
    configs = [triton.Config({"XBLOCK": block}, num_warps=4, num_stages=1) for block in blocks]
    meta = {"autotune_local_cache": True}
    if chosen is not None:
        _, cache, _ = check_autotune_cache(configs, module.__file__, meta)
        cache.save(configs[blocks.index(chosen)], 1.0)
    configs, _, info = check_autotune_cache(configs, module.__file__, meta)  # as Inductor's decorator looks it up
    autotuner = CachingAutotuner(
        getattr(module, name),
        {"device": DeviceProperties.create(torch.device("cpu")), "signature": {}},
        configs,
        None,
        [],
        False,
        HeuristicType.POINTWISE,
        size_hints={"x": 1024},
        inductor_meta=meta,
        filename=module.__file__,
        autotune_cache_info=info,
    )
    setattr(module, name, autotuner)
    return module


@pytest.fixture
def inductor_cache(tmp_path: Path, monkeypatch):
    from torch._inductor.codecache import PyCodeCache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    yield tmp_path / "inductor"
    PyCodeCache.cache_clear()  # the modules made here are gone from this process's record


def test_each_inductor_kernel_says_how_its_config_was_found_and_which_it_ran(inductor_cache: Path):
    from torch._inductor.codecache import PyCodeCache

    hit = _inductor_kernel("triton_poi_fused_mul_0", 2, [128, 256], chosen=256)
    miss = _inductor_kernel("triton_poi_fused_mul_1", 3, [128, 256, 512], chosen=None)
    only = _inductor_kernel("triton_poi_fused_mul_2", 4, [1024], chosen=None)
    # A kernel Inductor has precompiled: its own list of configs is gone (``configs = None``); the count still says
    # what it had (an H200 run recorded 0 configs for such kernels before).
    hit.triton_poi_fused_mul_0.configs = None
    only.triton_poi_fused_mul_2.configs = None
    wrapper = PyCodeCache.load("x = 1\n")
    wrapper.triton_poi_fused_mul_0 = hit.triton_poi_fused_mul_0  # a graph's wrapper names the kernels it launches
    kernels = inductor_kernels([hit, miss, only, wrapper])

    def row(module, found_by: str, configs: int, ran: dict | None) -> dict:
        name = next(n for n in vars(module) if n.startswith("triton_poi_fused_mul_"))
        source = Path(module.__file__).stem
        return {
            "kind": "inductor",
            "kernel": name,
            "source": source,
            "found_by": found_by,
            "configs": configs,
            "ran": ran,
        }

    assert kernels == [
        row(hit, "hit", 1, {"XBLOCK": 256, "num_warps": 4, "num_stages": 1}),
        row(miss, "miss", 3, None),  # never called in this process: nothing was chosen
        row(only, "only 1 config", 1, {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}),
    ]
    assert Path(hit.__file__).is_relative_to(inductor_cache)
    # The process's record reads the same kernels from the modules Inductor loaded.
    record = autotuning_record(None)
    assert [k for k in record["kernels"] if k["kernel"].startswith("triton_poi_fused_mul_")] == kernels
    assert record["autotuned"] >= 2  # the hit (chosen earlier) and the miss (three to choose from)


class _LauncherDouble:
    """Test double for a launcher (a config compiled into a GPU binary, which a CPU cannot make): its config only."""

    def __init__(self, config):
        self.config = config


def test_a_kernel_autotuned_among_configs_made_after_the_cache_lookup_is_uncached(inductor_cache: Path):
    """One config at the cache lookup (``only 1 config``: no cache entry), then a second made by halving its block
    (Inductor's ``_dynamic_scale_rblock`` does so for a reduction whose registers limit its occupancy) and both timed
    at the first call, as ``autotune_to_one_config`` leaves it: one launcher, the time spent beyond the precompile.
    The record says it was autotuned here and not kept (``uncached``), what timing took, and the config that won."""
    from runner.analysis.records import _autotuned

    module = _inductor_kernel("triton_poi_fused_mul_3", 5, [1024], chosen=None)
    autotuner = module.triton_poi_fused_mul_3
    assert autotuner.autotune_cache_info["autotune_cache_state"] == "only 1 config"
    halved = triton.Config({"XBLOCK": 512}, num_warps=4, num_stages=1)
    autotuner.configs = None  # precompiled
    autotuner.launchers = [_LauncherDouble(halved)]
    autotuner.precompile_time_taken_ns, autotuner.autotune_time_taken_ns = 40_000_000, 52_500_000
    (kernel,) = [k for k in inductor_kernels([module]) if k["kernel"] == "triton_poi_fused_mul_3"]
    assert kernel["found_by"] == "uncached" and kernel["configs"] is None and kernel["benchmark_ms"] == 12.5
    assert kernel["ran"] == {"XBLOCK": 512, "num_warps": 4, "num_stages": 1}
    record = {"kernels": [kernel]}
    assert _autotuned(record)["kernels_autotuned_here"] == 1 and _autotuned(record)["kernels_cached"] == 0
    # Never timed (its first call not yet made, or one launcher and no time spent on choosing): only 1 config.
    autotuner.autotune_time_taken_ns = 0
    (kernel,) = [k for k in inductor_kernels([module]) if k["kernel"] == "triton_poi_fused_mul_3"]
    assert kernel["found_by"] == "only 1 config" and kernel["configs"] == 1 and "benchmark_ms" not in kernel


_AUTOTUNED_CANDIDATE = (
    DOUBLING_TASK.replace("class Model(", "class ModelNew(")
    + """
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"]
)
@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2.0, mask=offsets < n)
"""
)


def test_a_candidates_triton_autotuners_are_in_its_result(tmp_path: Path):
    """The worker records them once the evaluation is over (never called on the CPU: nothing chosen yet)."""
    shapes = {"small": {"n": 64}, "perf": {"n": 256}}
    job = in_process_job(tmp_path, DOUBLING_TASK, _AUTOTUNED_CANDIDATE, "double", shapes, TimingSettings(batch=2))
    result = evaluate(job, tmp_path)
    assert result.verdict.status == "correct", result.verdict
    triton_kernels = [k for k in result.autotuning["kernels"] if k["kind"] == "triton.autotune"]
    assert triton_kernels == [{"kind": "triton.autotune", "kernel": "scale", "configs": 2, "ran": {}}]
    assert json.loads(json.dumps(result.to_dict()))["autotuning"] == result.autotuning
    # Its MLflow child run counts them (runner/tracking/child_record.py); the configs are in the result artifact.
    job["task"].update(category="elementwise", level=1)
    job["meta"] = {"method": "directory", "model": "m", "hardware": "cpu", "suite": "s", "executor": "local"}
    (tmp_path / "job.json").write_text(json.dumps(job))
    metrics = child_record(tmp_path, result, "commit").metrics
    assert {k: v for k, v in metrics.items() if k.startswith("kernels_")} == {
        "kernels_cached": 0.0,
        "kernels_autotuned_here": 0.0,
        "kernels_triton_autotune": 1.0,
    }


def test_a_triton_autotuners_choice_per_key_is_plain_json(tmp_path: Path):
    (tmp_path / "c.py").write_text(_AUTOTUNED_CANDIDATE)
    module = import_file(tmp_path / "c.py", "kbench_test_autotuned")
    assert triton_autotuners(module)[0]["ran"] == {}
    assert triton_autotuners(None) == []
    assert config_dict(module.scale.configs[1]) == {"BLOCK": 128, "num_warps": 4, "num_stages": 3}


def test_ran_configs_compare_alike_only_when_every_kernel_ran_the_same_config():
    hit = {"kind": "inductor", "kernel": "k0", "source": "abc", "found_by": "hit", "configs": 1, "ran": {"XBLOCK": 256}}
    other = dict(hit, ran={"XBLOCK": 128})
    second = dict(hit, kernel="k1", source="def")
    assert ran_configs({"kernels": [hit, second]}) == {
        "inductor:k0:abc": {"XBLOCK": 256},
        "inductor:k1:def": hit["ran"],
    }
    assert ran_configs({}) is None and ran_configs({"not_read": "AttributeError: ..."}) is None
    same = ran_configs({"kernels": [hit]})
    assert kernels_alike(same, ran_configs({"kernels": [dict(hit)]})) == "same"
    assert kernels_alike(same, ran_configs({"kernels": [other]})) == "different"
    assert kernels_differing(same, ran_configs({"kernels": [other, second]})) == ["inductor:k0:abc", "inductor:k1:def"]
    assert kernels_alike({}, {}) == "no kernels"
    assert kernels_alike(same, None) == "not recorded"


def test_repeat_says_which_pairs_ran_their_kernels_alike(two_passes, tmp_path: Path):  # noqa: F811
    """Two real CPU runs of the reference method: no autotuned kernels. With one run's record of a task changed to
    another config, that pair is "different" and names the kernel; a result from before the record, "not recorded"."""
    first, second = two_passes
    figures = repeat(first, second)
    assert figures["autotuning"] == {"same": 0, "different": 0, "no kernels": 2, "not recorded": 0}
    copies = []
    for run, block in ((first, 256), (second, 128)):
        copy = tmp_path / run.name
        shutil.copytree(run, copy)
        for path in copy.glob("jobs/*/out/result.json"):
            result = json.loads(path.read_text())
            kernel = {"kind": "inductor", "kernel": "k0", "source": "abc", "found_by": "hit", "configs": 1}
            if result["task_id"] == "gelu_tanh":
                result["autotuning"] = {"kernels": [dict(kernel, ran={"XBLOCK": block})], "autotuned": 1}
            elif run is second:
                del result["autotuning"]
            path.write_text(json.dumps(result))
        copies.append(copy)
    figures = repeat(*copies)
    assert figures["autotuning"] == {"same": 0, "different": 1, "no kernels": 0, "not recorded": 1}
    rows = {row["task"]: row for row in figures["largest"]}
    assert rows["gelu_tanh"]["autotuning"] == "different"
    assert rows["gelu_tanh"]["kernels_differing"] == ["inductor:k0:abc"]
    assert (
        rows["leaky_relu_fp32"]["autotuning"] == "not recorded" and "kernels_differing" not in rows["leaky_relu_fp32"]
    )
