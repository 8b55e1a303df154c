"""Starting evaluations by the GPU memory left (runner/gpu/memory_admission.py).

The GPU's memory reading is a test double (``FakeGpuMemory``): NVML answers only on a machine with a
GPU. Everything else (threads, the waiting, the promises of just-started evaluations) is the real
code; tests/test_gpu.py runs the whole path on a GPU, where another process holds the memory.
"""

from __future__ import annotations

import threading
import time

import pytest

from runner.gpu import memory_admission
from runner.gpu.memory_admission import GIB, MemoryAdmission


class FakeGpuMemory:
    """Test double for NVML's memory reading of one GPU: ``(free, total)`` bytes, set by the test."""

    def __init__(self, free_gib: float, total_gib: float = 80.0) -> None:
        self.free = int(free_gib * GIB)
        self.total = int(total_gib * GIB)

    def __call__(self, index: int) -> tuple[int, int]:
        return self.free, self.total


def _start_in_thread(admission: MemoryAdmission, record: dict, release: threading.Event, needed=None):
    started = threading.Event()

    def body():
        with admission.admitted(needed, record):
            started.set()
            release.wait(10)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, started


def test_the_first_evaluation_starts_whatever_is_free():
    admission = MemoryAdmission(0, 16 * GIB, read=FakeGpuMemory(free_gib=2))
    record: dict = {}
    with admission.admitted(record=record):
        pass
    assert record["started"] == "nothing else running"
    assert record["waited_s"] < 1


def test_a_second_evaluation_waits_until_the_memory_is_free():
    gpu = FakeGpuMemory(free_gib=40)
    admission = MemoryAdmission(0, 16 * GIB, read=gpu)
    release = threading.Event()
    first, first_started = _start_in_thread(admission, {}, release)
    assert first_started.wait(5)
    gpu.free = 10 * GIB  # the first evaluation took 30 GiB
    second_record: dict = {}
    second, second_started = _start_in_thread(admission, second_record, threading.Event())
    assert not second_started.wait(0.5), "started with 10 GiB free where 16 are needed"
    gpu.free = 30 * GIB
    assert second_started.wait(5)
    assert second_record["started"].endswith("GiB free") and second_record["waited_s"] >= 0.4
    release.set()
    first.join(5)


def test_what_just_started_evaluations_have_not_allocated_counts_as_taken(monkeypatch):
    """NVML still shows the memory free while the evaluation admitted a moment ago starts: two starting
    together must not both count the same 20 GiB."""
    monkeypatch.setattr(memory_admission, "SETTLE_S", 0.6)
    gpu = FakeGpuMemory(free_gib=20)
    admission = MemoryAdmission(0, 16 * GIB, read=gpu)
    release = threading.Event()
    running, running_started = _start_in_thread(admission, {}, release)
    assert running_started.wait(5)
    second, second_started = _start_in_thread(admission, {}, release)  # 20 free >= 16: starts
    assert second_started.wait(5)
    third_record: dict = {}
    third, third_started = _start_in_thread(admission, third_record, release)
    assert not third_started.wait(0.3), "the 16 GiB promised to the second were counted as free"
    assert third_started.wait(5)  # the promise lapses after SETTLE_S: NVML's reading is trusted again
    assert third_record["waited_s"] >= 0.3
    release.set()
    for thread in (running, second, third):
        thread.join(5)


def test_a_promise_counts_from_when_its_worker_begins_the_job(monkeypatch):
    """At a run's start the first workers wait seconds for the fork server's imports: what they were admitted for
    counts as taken until ``SETTLE_S`` after each began its job, not after its admission (seven of eight ran out
    of memory: BENCHMARKS.md, twenty-ninth session); and an evaluation that ended takes its promise with it."""
    monkeypatch.setattr(memory_admission, "SETTLE_S", 0.3)
    gpu = FakeGpuMemory(free_gib=20)
    admission = MemoryAdmission(0, 16 * GIB, read=gpu)
    release, second_release = threading.Event(), threading.Event()
    running, running_started = _start_in_thread(admission, {}, release)
    assert running_started.wait(5)
    began = threading.Event()
    second_started = threading.Event()

    def second_body():
        with admission.admitted(None, {}, began.is_set):
            second_started.set()
            second_release.wait(10)

    second = threading.Thread(target=second_body, daemon=True)
    second.start()
    assert second_started.wait(5)
    third_record: dict = {}
    third, third_started = _start_in_thread(admission, third_record, release)
    assert not third_started.wait(0.9), "the promise lapsed before its worker began"
    began.set()
    assert not third_started.wait(0.15), "the promise lapsed as its worker began"
    assert third_started.wait(5)  # SETTLE_S after the worker began
    assert third_record["waited_s"] >= 1.0
    # An evaluation that ends before its worker began (a sandbox that failed to start) promises nothing more.
    fourth_began = threading.Event()
    fourth_done = threading.Event()

    def fourth_body():
        with admission.admitted(None, {}, fourth_began.is_set):
            pass
        fourth_done.set()

    gpu.free = 40 * GIB
    fourth = threading.Thread(target=fourth_body, daemon=True)
    fourth.start()
    assert fourth_done.wait(5)
    fifth, fifth_started = _start_in_thread(admission, {}, release)
    assert fifth_started.wait(1), "an ended evaluation's promise still counted"
    release.set()
    second_release.set()
    for thread in (running, second, third, fourth, fifth):
        thread.join(5)


def test_a_start_that_waited_the_limit_goes_ahead(monkeypatch):
    monkeypatch.setattr(memory_admission, "WAIT_LIMIT_S", 0.3)
    admission = MemoryAdmission(0, 16 * GIB, read=FakeGpuMemory(free_gib=1))
    release = threading.Event()
    first, first_started = _start_in_thread(admission, {}, release)
    assert first_started.wait(5)
    record: dict = {}
    started = time.monotonic()
    with admission.admitted(record=record):
        assert time.monotonic() - started >= 0.3
    assert record["started"].startswith("waited the limit")
    release.set()
    first.join(5)


def test_without_a_memory_reading_nothing_waits():
    admission = MemoryAdmission(0, 16 * GIB, read=lambda index: None)
    release = threading.Event()
    first, first_started = _start_in_thread(admission, {}, release)
    assert first_started.wait(5)
    record: dict = {}
    with admission.admitted(record=record):
        pass
    assert record["started"] == "no memory reading"
    assert admission.retry_needs() == 16 * GIB
    release.set()
    first.join(5)


def test_a_second_try_waits_for_half_the_gpu():
    admission = MemoryAdmission(0, 16 * GIB, read=FakeGpuMemory(free_gib=30, total_gib=80))
    assert admission.retry_needs() == 40 * GIB


def _start_second_try(admission: MemoryAdmission, record: dict, release: threading.Event):
    started = threading.Event()

    def body():
        with admission.admitted(admission.retry_needs(), record, second_try=True):
            started.set()
            release.wait(10)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, started


def test_no_evaluation_starts_while_a_second_try_asks_or_runs(monkeypatch):
    """A second try is an evaluation's last: with 16 in flight on an H200, one started with half the GPU free ran out
    again as the evaluations admitted after it grew (BENCHMARKS.md, forty-third session). From its asking to its end
    none other starts, though each would find the 16 GiB it needs; it starts once the others running have ended."""
    monkeypatch.setattr(memory_admission, "SETTLE_S", 0.0)  # no promise holds: only the free memory counts
    gpu = FakeGpuMemory(free_gib=36, total_gib=80)
    admission = MemoryAdmission(0, 16 * GIB, read=gpu)
    first_release = threading.Event()
    first, first_started = _start_in_thread(admission, {}, first_release)
    assert first_started.wait(5)
    second_record: dict = {}
    second_release = threading.Event()
    second, second_started = _start_second_try(admission, second_record, second_release)
    assert not second_started.wait(0.3), "a second try started with 36 GiB free where it waits for 40"
    newcomer_record: dict = {}
    newcomer, newcomer_started = _start_in_thread(admission, newcomer_record, threading.Event())
    assert not newcomer_started.wait(0.3), "an evaluation started while a second try was asking"
    first_release.set()
    assert second_started.wait(5)
    assert second_record["started"] == "nothing else running"
    assert not newcomer_started.wait(0.3), "an evaluation started beside a second try"
    second_release.set()
    assert newcomer_started.wait(5)
    assert newcomer_record["started"] == "nothing else running"
    for thread in (first, second, newcomer):
        thread.join(5)


def test_a_second_try_waits_while_another_runs_and_an_interrupted_one_holds_nothing_back():
    gpu = FakeGpuMemory(free_gib=70, total_gib=80)
    admission = MemoryAdmission(0, 16 * GIB, read=gpu)
    one_release = threading.Event()
    one, one_started = _start_second_try(admission, {}, one_release)
    assert one_started.wait(5)
    other, other_started = _start_second_try(admission, {}, threading.Event())
    assert not other_started.wait(0.3), "two second tries ran at once"
    one_release.set()
    assert other_started.wait(5)
    other.join(0.1)

    # A second try interrupted while it asks (the run stopped, Ctrl-C): the others start as before.
    fresh = MemoryAdmission(0, 16 * GIB, read=FakeGpuMemory(free_gib=70, total_gib=80))
    running_release = threading.Event()
    running, running_started = _start_in_thread(fresh, {}, running_release)
    assert running_started.wait(5)
    asked = {"n": 0}
    may_start = fresh._may_start

    def interrupted_on_its_second_look(*args):
        asked["n"] += 1
        if asked["n"] == 2:
            raise KeyboardInterrupt
        return None  # not yet

    fresh._may_start = interrupted_on_its_second_look
    with pytest.raises(KeyboardInterrupt):
        with fresh.admitted(fresh.retry_needs(), {}, second_try=True):
            raise AssertionError("the second try started")
    fresh._may_start = may_start
    record: dict = {}
    with fresh.admitted(record=record):
        pass
    assert record["started"] == "54.0 GiB free"  # 70 free, 16 promised to the one running
    running_release.set()
    running.join(5)
