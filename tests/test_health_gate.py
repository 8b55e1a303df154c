"""The NVML health gate before a GPU evaluation: what it waits for, and whose processes are foreign.

NVML's reading is a test double (this machine has no GPU); the processes are real.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from runner.gpu import nvml

POWER_CAP = 0x4


def readings_double(monkeypatch, *readings: dict) -> list[dict]:
    """NVML answers with ``readings`` in turn, then the last one for ever (test double: no GPU here); a read of the
    compute processes alone (``nvml.compute_processes``) takes its turn too, and answers with that reading's list."""
    answers = list(readings)

    def read_gpu(index):
        reading = {"available": True, "index": index, "temperature_c": 40, "throttle_mask": 0, "compute_processes": []}
        reading.update(answers.pop(0) if len(answers) > 1 else answers[0])
        return reading

    monkeypatch.setattr(nvml, "read_gpu", read_gpu)
    monkeypatch.setattr(nvml, "compute_processes", lambda index: read_gpu(index)["compute_processes"])
    return answers


def test_with_nothing_else_running_a_power_cap_is_waited_out(monkeypatch):
    readings_double(monkeypatch, {"throttle_mask": POWER_CAP}, {"throttle_mask": 0})
    gate = nvml.health_gate(0, 85, cooldown_limit_s=60)
    assert gate.ok and gate.problems == [] and gate.waited_s >= 1.9 and gate.others_running == 0
    assert gate.waited_for == ["throttled: sw_power_cap"]  # why it waited, though it passed


def test_a_hot_gpu_is_waited_for_and_the_record_says_from_what_temperature(monkeypatch):
    readings_double(monkeypatch, {"temperature_c": 61}, {"temperature_c": 58}, {"temperature_c": 55})
    gate = nvml.health_gate(0, 56, cooldown_limit_s=60)
    assert gate.ok and gate.problems == [] and gate.waited_s >= 3.9
    assert gate.waited_for == ["temperature 61 C > 56 C"] and gate.reading["temperature_c"] == 55
    readings_double(monkeypatch, {"temperature_c": 40})
    assert nvml.health_gate(0, 56, cooldown_limit_s=60).waited_for == []  # no wait, nothing waited for


def test_a_power_cap_that_does_not_clear_is_a_problem_after_the_limit(monkeypatch):
    readings_double(monkeypatch, {"throttle_mask": POWER_CAP})
    gate = nvml.health_gate(0, 85, cooldown_limit_s=0)
    assert not gate.ok and gate.problems == ["throttled: sw_power_cap"]


def test_beside_the_runs_own_evaluations_the_gate_reads_once_and_does_not_wait(monkeypatch):
    """Their measurement keeps the GPU power-capped: waiting would idle this slot, not cool the GPU. The
    temperature limit is still a problem (recorded; the run proceeds or fails as configured)."""
    readings_double(monkeypatch, {"throttle_mask": POWER_CAP | 0x20})
    started = time.monotonic()
    gate = nvml.health_gate(0, 85, cooldown_limit_s=60, others_running=3)
    assert time.monotonic() - started < 1.0
    assert gate.ok and gate.problems == [] and gate.waited_s < 1.0 and gate.others_running == 3
    assert gate.reading["throttle_mask"] == POWER_CAP | 0x20  # the reading is kept as it was
    readings_double(monkeypatch, {"temperature_c": 90})
    gate = nvml.health_gate(0, 85, cooldown_limit_s=60, others_running=1)
    assert not gate.ok and gate.problems == ["temperature 90 C > 85 C"] and gate.waited_s < 1.0


@pytest.fixture
def child_and_grandchild():
    """A child of this process and a child of that one, both sleeping, killed after the test."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"]
    )
    grandchildren: list[int] = []
    try:
        deadline = time.monotonic() + 10
        while not grandchildren and time.monotonic() < deadline:
            children = f"/proc/{child.pid}/task/{child.pid}/children"
            grandchildren = [int(pid) for pid in open(children).read().split()] if os.path.exists(children) else []
            time.sleep(0.05)
        assert grandchildren, "the child started no process"
        yield child.pid, grandchildren[0]
    finally:
        for pid in grandchildren:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        child.kill()
        child.wait()


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc")
def test_the_runs_own_processes_are_not_foreign(monkeypatch, child_and_grandchild):
    """A worker the executor has not listed yet (being handed its job, or tearing its context down) is
    this process's descendant, not another tenant; this process's parent is not."""
    child, grandchild = child_and_grandchild
    outsider = os.getppid()
    readings_double(monkeypatch, {"compute_processes": [child, grandchild, outsider]})
    gate = nvml.health_gate(0, 85, own_pids=set(), cooldown_limit_s=0, ending_grace_s=0.2)
    assert gate.problems == [f"foreign compute processes [{outsider}]"] and gate.ended == []
    assert nvml.descends_from_this_process(grandchild) and not nvml.descends_from_this_process(outsider)
    assert not nvml.descends_from_this_process(2**22 + 12345)  # no such process


def test_a_process_that_leaves_nvmls_list_within_the_grace_was_ending_not_a_tenant(monkeypatch):
    """A worker of the run that has ended and been reaped is no one's descendant any more, but NVML lists it while
    its context is torn down: the gate reads again, and a process that leaves the list is recorded as ended, not
    foreign. One that stays listed through the grace is a tenant. (On the H100 two gates of a cold torch_compile
    pass flagged three of the run's own workers so, and ``on_unhealthy=fail`` would have stopped the run.)"""
    ended = subprocess.Popen(["true"])
    ended.wait()  # reaped: /proc has no entry for it
    assert not nvml.descends_from_this_process(ended.pid)
    tenant = os.getppid()
    readings_double(
        monkeypatch,
        {"compute_processes": [ended.pid, tenant]},
        {"compute_processes": [ended.pid, tenant]},
        {"compute_processes": [tenant]},
    )
    started = time.monotonic()
    gate = nvml.health_gate(0, 85, own_pids=set(), cooldown_limit_s=0, ending_grace_s=0.5)
    assert time.monotonic() - started >= 0.5  # the tenant was given the whole grace
    assert gate.problems == [f"foreign compute processes [{tenant}]"] and not gate.ok
    assert gate.ended == [ended.pid]
    readings_double(monkeypatch, {"compute_processes": [ended.pid]}, {"compute_processes": []})
    started = time.monotonic()
    gate = nvml.health_gate(0, 85, own_pids=set(), cooldown_limit_s=0, ending_grace_s=5.0)
    assert gate.ok and gate.problems == [] and gate.ended == [ended.pid]
    assert time.monotonic() - started < 1.0  # back as soon as it left, not after the grace


def test_the_compute_processes_alone_are_read_as_the_whole_reading_reads_them():
    """The gate's re-reads ask NVML for the process list only; where NVML cannot answer (no GPU here) that read says
    why, as the whole reading's unsupported queries do, and is no error. (On a GPU, tests/test_gpu.py reads a
    worker's context through it.)"""
    reading = nvml.read_gpu(0)
    pids = nvml.compute_processes(0)
    if reading["available"]:
        assert isinstance(pids, list) and isinstance(reading["compute_processes"], list)
    else:
        assert isinstance(pids, str) and pids.startswith("n/a (")
