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


# A spare's first uses on the device (``prewarm_device``), run here on the CPU: what is under test is how they
# hold the device's token (the ready gate, the hand-over to a job), which is the same on any device. Each case
# runs in a fresh interpreter, as a spare is one (the records are the process's own).
_FIRST_USES = r"""
import json, os, sys, time, torch
from runner.worker import prewarm
from runner.worker.device_token import DeviceToken
case, token_path, job = sys.argv[1], sys.argv[2] or None, sys.argv[3]
read, write = os.pipe()
stdin = os.fdopen(read)
if job == "before":
    os.write(write, b"/runs/x/jobs/abc\n")
started = time.time()
prewarm.prewarm_device(torch.device("cpu"), stdin, token_path)
out = {"started": started, "prewarmed": prewarm.PREWARMED, "spare_token": prewarm.SPARE_DEVICE_TOKEN}
if case == "hand-over":
    record = {}
    token = prewarm.job_token(record, sys.argv[4])
    other = DeviceToken(token_path)
    import fcntl
    try:
        fcntl.flock(other._token, fcntl.LOCK_EX | fcntl.LOCK_NB)
        out["exclusive_free_while_the_job_holds"] = True
    except BlockingIOError:
        out["exclusive_free_while_the_job_holds"] = False
    out["mode"] = token.mode
    token.close()
    out["record"] = record
print(json.dumps(out))
"""


def _first_uses(tmp_path, case: str, token, job: str = "none", isolation: str = "device", wait: bool = True):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    if token:
        env["KBENCH_DEVICE_TOKEN"] = str(token)  # as the executor sets it (device_token.TOKEN_ENV)
    command = [sys.executable, "-c", _FIRST_USES, case, str(token or ""), job, isolation]
    proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def test_a_spares_first_uses_wait_for_a_gap_between_measurements(tmp_path):
    """A measurement is ready (queued for its turn): the spare's first uses do not start while it waits, nor
    during its turn; they run once the turn is over, and the token is let go after them (no job came)."""
    import time

    from runner.worker.device_token import EXCLUSIVE, DeviceToken, create_token_files

    token = create_token_files(tmp_path / "gpu.token")
    with DeviceToken(token) as measurement:
        measurement.approach()
        spare = _first_uses(tmp_path, "gap", token, wait=False)
        time.sleep(3.0)  # the spare's interpreter starts and waits at the ready gate meanwhile
        assert spare.poll() is None
        measurement.hold(EXCLUSIVE)
        time.sleep(0.5)
        turn_ended = time.time()
    out, err = spare.communicate(timeout=240)
    assert spare.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert isinstance(result["prewarmed"]["device first uses"], float), result["prewarmed"]
    ((start, end, mode),) = result["spare_token"]["windows"]
    assert mode == "shared" and start >= turn_ended and end is not None
    assert "handed_to_the_job" not in result["spare_token"]


def test_a_job_that_came_meanwhile_gets_the_token_as_held(tmp_path):
    """The job is waiting when the spare gets the token: the first uses are skipped, and the job holds the
    spare's token from then on (one window, no second pass at the gate: its first phases start in this gap),
    so no measurement can take the device meanwhile."""
    from runner.worker.device_token import create_token_files

    token = create_token_files(tmp_path / "gpu.token")
    result = _first_uses(tmp_path, "hand-over", token, job="before")
    assert result["prewarmed"]["device first uses"].startswith("not done: its job came")
    assert result["spare_token"]["handed_to_the_job"] is True
    assert result["mode"] == "shared" and result["exclusive_free_while_the_job_holds"] is False
    ((start, end, mode),) = result["record"]["windows"]
    assert mode == "shared" and result["started"] <= start < end
    assert result["record"]["waited_s"] == 0.0 and result["record"]["path"] == str(token)


def test_under_measurement_isolation_the_job_does_not_keep_the_spares_token(tmp_path):
    """Where shared phases take no lock (``measurement_isolation=measurements``), a token the spare held for
    its job is let go; the job's record starts with the spare's window, closed."""
    from runner.worker.device_token import create_token_files

    token = create_token_files(tmp_path / "gpu.token")
    result = _first_uses(tmp_path, "hand-over", token, job="before", isolation="measurements")
    assert result["exclusive_free_while_the_job_holds"] is True
    ((start, end, mode),) = result["record"]["windows"]
    assert mode == "shared" and end is not None


def test_without_a_token_a_spare_makes_no_first_uses(tmp_path):
    """No token to hold: the first uses would run beside whatever measures, so none run."""
    result = _first_uses(tmp_path, "none", None)
    assert result["prewarmed"] == {"device first uses": "not done: no device token to hold"}
    assert result["spare_token"] == {}


def test_spares_on_a_gpu_are_told_to_make_their_first_uses_unless_the_warm_up_runs_them(tmp_path):
    """The executor tells a worker on a GPU to make its first uses before its job (on by default, off when
    asked); never a worker of the compile warm-up, whose token the orchestrator holds: a spare waiting for it
    would wait for the warm-up that waits for the spare."""
    from runner.cli import warmup_executor_settings
    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor
    from runner.worker.device_token import DEVICE_PREWARM_ENV, PREINIT_ENV

    def env(settings, gpu):
        return LocalExecutor(settings).child_env(tmp_path / "home", gpu)

    settings = ExecutorSettings(cache_dir=tmp_path, prestart=6, in_flight=8)
    assert env(settings, "GPU-0")[DEVICE_PREWARM_ENV] == "1" and env(settings, "GPU-0")[PREINIT_ENV] == "1"
    assert DEVICE_PREWARM_ENV not in env(settings, None)
    assert DEVICE_PREWARM_ENV not in env(ExecutorSettings(cache_dir=tmp_path, spare_device_prewarm=False), "GPU-0")
    warmup = warmup_executor_settings(settings)
    assert (warmup.prestart, warmup.in_flight) == (0, 1)
    assert DEVICE_PREWARM_ENV not in env(warmup, "GPU-0") and env(warmup, "GPU-0")[PREINIT_ENV] == "1"
