"""A turn kept clear of other CUDA contexts (runner/worker/quiet_turn.py): the device's context lock taken for the turn
from the batch where a side waits for the device, a context being made waited for at most ``wait_s``, the lock let
go after the turn, what happened recorded; the setting reaches each job. Real flocks between real processes; the
timing loop's side of it (asked only once a side is found waiting) on the simulated stream in
tests/test_queue_lead.py, and on a GPU's own wait probe in tests/test_gpu.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.configure import compose_config, hashed_yaml, to_settings
from runner.gpu.lock import work_token
from runner.worker.device_token import context_lock_of, create_token_files, one_context_at_a_time
from runner.worker.quiet_turn import QuietTurn
from tests.conftest import context_lock_free, executor_switch_result

# A process that holds the context lock as a worker making its context does, for a time given, saying when it has it.
_HOLDER = """
import sys, time
from runner.worker.device_token import one_context_at_a_time
record = {}
with one_context_at_a_time(sys.argv[1], record):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def token(tmp_path: Path) -> Path:
    return create_token_files(tmp_path / "gpu.work")


def _held_elsewhere(token: Path, seconds: float) -> subprocess.Popen:
    """A process holding the context lock for ``seconds``, once it says it has it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(token), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_free_lock_is_held_for_the_turn_and_let_go_after_it(token: Path):
    quiet = QuietTurn(token)
    assert not quiet.asked
    assert context_lock_free(token)
    assert quiet.hold() is True
    assert quiet.asked and quiet.hold() is True  # asked once: a second call only says so
    assert not context_lock_free(token)  # a worker making its context now would wait for the turn
    quiet.release()
    assert context_lock_free(token)
    start, end = quiet.record["window"]
    assert quiet.record["asked_at"] <= start <= end and quiet.record["waited_s"] < 0.5
    assert "not taken" not in quiet.record
    quiet.release()  # twice: nothing more


def test_a_context_being_made_is_waited_for_then_the_lock_is_held(token: Path):
    holder = _held_elsewhere(token, 0.4)
    try:
        quiet = QuietTurn(token, wait_s=20.0)
        assert quiet.hold() is True
        # It waited for the other process's context, not the whole limit.
        assert 0.1 < quiet.record["waited_s"] < 15, quiet.record
        assert not context_lock_free(token)
        quiet.release()
        assert context_lock_free(token)
    finally:
        holder.wait(timeout=60)


def test_a_lock_held_past_the_limit_is_given_up_and_let_go_at_once_when_it_comes(token: Path):
    holder = _held_elsewhere(token, 1.5)
    try:
        quiet = QuietTurn(token, wait_s=0.3)
        asked = time.monotonic()
        assert quiet.hold() is False
        assert time.monotonic() - asked < 1.2  # the turn was not held up for the whole context
        assert quiet.record["not taken"] == "the context lock stayed held for 0.3 s"
        assert 0.25 < quiet.record["waited_s"] < 1.2 and "window" not in quiet.record
        assert quiet.hold() is False
        quiet.release()  # the waiting thread owns the lock's descriptor now
    finally:
        holder.wait(timeout=60)
    # The thread that was still waiting got the lock after the holder and let it go at once: contexts go on.
    deadline = time.monotonic() + 30
    while not context_lock_free(token):
        assert time.monotonic() < deadline, "the given-up lock was kept"
        time.sleep(0.05)


def test_a_worker_making_its_context_waits_for_the_turn(token: Path):
    quiet = QuietTurn(token)
    assert quiet.hold()
    worker = subprocess.Popen([sys.executable, "-c", _HOLDER, str(token), "0"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert worker.poll() is None  # still waiting for the lock
        quiet.release()
        assert worker.stdout.readline().strip() == "held"
    finally:
        worker.wait(timeout=60)
    record: dict = {}
    with one_context_at_a_time(token, record):  # and after it, contexts are made as before
        assert record["waited_s"] < 5


def test_without_a_token_or_its_context_lock_nothing_is_held(tmp_path: Path):
    none = QuietTurn(None)
    assert none.hold() is False and none.record["not taken"] == "no device token"
    none.release()
    missing = QuietTurn(tmp_path / "gone.work")  # a token made by an older kbench: no context lock file
    assert missing.hold() is False and missing.record["not taken"].startswith("FileNotFoundError")
    missing.release()


def test_the_lock_is_the_one_the_run_s_workers_make_their_contexts_under(tmp_path: Path, monkeypatch):
    # The token the orchestrator makes for a GPU comes with the context lock this takes.
    monkeypatch.setenv("KBENCH_LOCK_DIR", str(tmp_path / "locks"))
    path = work_token("GPU-test")
    assert context_lock_of(path).exists()
    quiet = QuietTurn(path)
    assert quiet.hold()
    assert not context_lock_free(path)
    quiet.release()


def test_the_setting_is_on_by_default_and_not_part_of_the_configurations_identity():
    on = compose_config(["experiment=h100_fullsuite"])
    off = compose_config(["experiment=h100_fullsuite", "executor.quiet_waiting_turns=false"])
    assert to_settings(on).quiet_waiting_turns is True and to_settings(off).quiet_waiting_turns is False
    # How a run is isolated, as release_under_token: a run cut off with it on resumes with it off.
    assert hashed_yaml(on) == hashed_yaml(off)


@pytest.mark.parametrize("flag", ["true", "false"])
def test_the_run_writes_the_setting_into_each_job(tmp_path: Path, flag: str):
    result = executor_switch_result(tmp_path, "quiet_waiting_turns", flag)
    assert result["timing"]["quiet_turn"] is None  # a CPU: no side probed, nothing asked
