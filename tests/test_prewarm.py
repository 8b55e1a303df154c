"""A spare's torch.compile pre-warm (runner/worker/prewarm.py): host work that a compile later reuses.

Runs in a fresh interpreter, as a spare is one: the pre-warm, then a real torch.compile on the CPU
(inductor's C++ backend here; the GPU path passes the CUDA device the same way). The pattern
registration must be the one the compile uses (registered once, found in the cache), and the
compiled function must still compute what eager PyTorch computes.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

_CHILD = r"""
import json, torch
from runner.worker.prewarm import prewarm_compiler
from torch._inductor.fx_passes import joint_graph, post_grad
record = prewarm_compiler(torch.device("cpu"))
registered = (joint_graph.lazy_init.cache_info().currsize, post_grad.lazy_init.cache_info().currsize)
f = lambda x, w: torch.softmax(x @ w, dim=-1) * 2 + 1
x, w = torch.randn(8, 16), torch.randn(16, 4)
same = torch.allclose(torch.compile(f)(x, w), f(x, w), atol=1e-6)
print(json.dumps({
    "record": record, "registered": registered, "same": same,
    "after": (joint_graph.lazy_init.cache_info().currsize, post_grad.lazy_init.cache_info().currsize),
    "hits": (joint_graph.lazy_init.cache_info().hits, post_grad.lazy_init.cache_info().hits),
}))
"""


def test_prewarm_registers_what_the_compile_then_reuses(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    record = out["record"]
    assert all(isinstance(v, float) for v in record.values()), record  # every step ran on this torch
    assert {"torch_key", "joint_graph patterns", "post_grad patterns"} <= set(record)
    assert out["registered"] == [1, 1]
    assert out["after"] == [1, 1] and min(out["hits"]) >= 1  # the compile found them: registered once
    assert out["same"]


_CUDA_ON_A_CPU_BUILD = r"""
import json, torch
from runner.worker.prewarm import prewarm_compiler
assert not torch.cuda.is_available()
print(json.dumps(prewarm_compiler(torch.device("cuda", 0))))
"""


def test_a_failing_step_is_recorded_and_the_spare_lives(tmp_path):
    """A spare must never die of its pre-warm (one did, on torch 2.11, where a name the pre-warm
    looked up did not exist: every evaluation of the run ended ``harness_failed``). Asked for the
    CUDA device on a build without CUDA, the steps that need it fail, are recorded as not done,
    and the call returns."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _CUDA_ON_A_CPU_BUILD], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240
    )
    if "AssertionError" in proc.stderr:
        pytest.skip("this build has CUDA")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["joint_graph patterns"].startswith("not done: RuntimeError")
    assert isinstance(record["torch_key"], float)


def test_a_spare_sees_whether_its_job_is_already_waiting():
    """A spare handed its job as it starts skips the pre-warm (the job goes first): ``job_waiting`` reads
    that off the pipe without consuming the line, and says no on an empty pipe."""
    import os

    from runner.worker.prewarm import job_waiting

    read, write = os.pipe()
    with os.fdopen(read) as stream, os.fdopen(write, "w") as writer:
        assert not job_waiting(stream)
        writer.write("/runs/x/jobs/abc\n")
        writer.flush()
        assert job_waiting(stream)
        assert stream.readline() == "/runs/x/jobs/abc\n"
        assert not job_waiting(stream)


_PROFILED_AFTER_PRELOAD = r"""
import json, sys
from runner.executors.zygote import preload
preload()
before = set(sys.modules)
import torch
from torch.profiler import ProfilerActivity, profile
prof = profile(activities=[ProfilerActivity.CPU])
prof.start()
torch.ones(4).add_(1)
prof.stop()
prof.events()
print(json.dumps(sorted(name for name in set(sys.modules) - before if name.startswith(("torch._dynamo", "torch._inductor")))))
"""


def test_the_fork_servers_imports_cover_the_kernel_census_profiler():
    """Regression (a full reference pass on the H100 with the fork server importing torch alone, twenty-third
    session): the kernel census's ``torch.profiler`` imports torch.compile's stack, so every job paid that
    import inside its correctness stage, holding the device's token, and the cohort gaps grew from 0.8 s to
    6-7 s. What the server imports before forking leaves the profiler nothing of that stack to import."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROFILED_AFTER_PRELOAD], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


_FORKED_AFTER_PRELOAD = r"""
import json, os, threading, time
import triton.compiler.compiler, triton.runtime.cache
from runner.executors.zygote import preload
from runner.worker.prewarm import PREWARMED
# The key made slower than the imports beside it (5 s more), so a server that did not wait for it would fork beside it.
home = triton.runtime.cache if hasattr(triton.runtime.cache, "triton_key") else triton.compiler.compiler
triton_key = home.triton_key
home.triton_key = lambda: (time.sleep(5), triton_key())[1]
preload()
threads = threading.active_count()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, json.dumps({"cached": triton_key.cache_info().currsize}).encode())
    os._exit(0)
os.waitpid(pid, 0)
child = json.loads(os.read(read, 4096))
print(json.dumps({"child": child, "threads": threads, "record": PREWARMED.get("triton key")}))
"""


def test_a_worker_forked_from_the_server_finds_tritons_source_key_cached():
    """Triton's source key hashes its compiler and ``libtriton.so`` (0.4-0.5 s in each of a run's first eight workers
    on the H200, inside their check kernels' first load). The fork server hashes it once, in a thread beside its
    imports, and joins that thread before it returns from them: no thread of its own runs when it forks, and a child
    forked afterwards finds the key cached."""
    pytest.importorskip("triton")
    proc = subprocess.run(
        [sys.executable, "-c", _FORKED_AFTER_PRELOAD], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["threads"] == 1
    assert out["child"] == {"cached": 1}
    assert isinstance(out["record"], float)


def test_the_check_kernels_marker_names_what_compiled_them(tmp_path, monkeypatch):
    """The marker a spare leaves in the checks' cache once it prepared every check kernel there is named for what
    the kernels were compiled by and for: a later process on another GPU architecture, or under another Triton,
    finds none and does not take a compile of seconds for a load. No cache of their own: no marker."""
    triton = pytest.importorskip("triton")
    from runner.worker.fused_checks import compiled_marker

    marker = compiled_marker(str(tmp_path), (9, 0))
    assert marker is not None and marker.parent == tmp_path and marker.name.startswith("prepared-")
    assert compiled_marker(str(tmp_path), (9, 0)) == marker
    assert compiled_marker(str(tmp_path), (10, 0)) != marker
    monkeypatch.setattr(triton, "__version__", triton.__version__ + ".other")
    assert compiled_marker(str(tmp_path), (9, 0)) != marker
    assert compiled_marker(None, (9, 0)) is None and compiled_marker("", (9, 0)) is None


def test_without_every_check_kernel_the_cache_is_not_marked(tmp_path, monkeypatch):
    """``prewarm_checks`` marks the checks' cache only where both preparations compiled every variant: on a
    machine without a CUDA device neither does, so a later worker whose job is waiting finds no marker."""
    import torch

    from runner.worker import prewarm

    if torch.cuda.is_available():
        pytest.skip("about a machine without a CUDA device")
    monkeypatch.setenv("KBENCH_CHECKS_CACHE", str(tmp_path))
    monkeypatch.setattr(prewarm, "PREWARMED", {})
    record = prewarm.prewarm_checks()
    assert record["fused checks"].startswith("not done")
    assert not list(tmp_path.iterdir())
    assert not prewarm.checks_compiled_in_cache()


def test_without_a_cuda_device_the_profiler_is_not_prewarmed(monkeypatch):
    """``prewarm_profiler`` starts the CUDA profiler only where there is a CUDA device: elsewhere it says so."""
    import torch

    from runner.worker import prewarm

    if torch.cuda.is_available():
        pytest.skip("about a machine without a CUDA device")
    monkeypatch.setattr(prewarm, "PREWARMED", {})
    assert prewarm.prewarm_profiler() == {"profiler": "not done: no CUDA device"}
