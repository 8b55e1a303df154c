"""``runner/setup_clock.py``: the set-up's parts from the process's start, read off ``/proc`` (a written copy of
its two files for the edge cases, this process's own for the real thing)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runner.setup_clock import SetupClock, added_parts, seconds_since_process_start


def _fake_proc(root: Path, stat: str, uptime: str) -> Path:
    (root / "self").mkdir(parents=True)
    (root / "self" / "stat").write_text(stat)
    (root / "uptime").write_text(uptime)
    return root


def test_the_process_start_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path: Path):
    ticks = os.sysconf("SC_CLK_TCK")
    # Field 22 (starttime) is 20 fields after the name; a name like "(a) b)" must not shift them.
    after_name = ["S"] + [str(n) for n in range(4, 22)] + [str(95 * ticks)] + ["0"] * 30
    proc = _fake_proc(tmp_path, "1234 ((a) b)) " + " ".join(after_name), "100.50 300.00\n")
    assert seconds_since_process_start(proc) == pytest.approx(5.5)


@pytest.mark.parametrize(
    "stat, uptime",
    [("1234 (python) S 1 2", "100.0 1.0"), ("1234 python S", "100.0 1.0"), ("1234 (p) " + "x " * 30, "100.0")],
)
def test_a_proc_that_cannot_say_gives_none(tmp_path: Path, stat: str, uptime: str):
    assert seconds_since_process_start(_fake_proc(tmp_path, stat, uptime)) is None


def test_no_proc_gives_none_and_no_interpreter_part(tmp_path: Path, monkeypatch):
    assert seconds_since_process_start(tmp_path / "none") is None
    monkeypatch.setattr("runner.setup_clock.seconds_since_process_start", lambda: None)
    assert SetupClock().parts == {}


def test_a_clock_in_a_process_older_than_its_run_has_no_interpreter_part():
    assert SetupClock(from_process_start=False).parts == {} and "interpreter" in SetupClock().parts


def test_this_process_started_before_its_clock_and_the_marks_add_up():
    clock = SetupClock()
    started = clock.parts["interpreter"]
    # Since this test process started: after the machine's boot, not an epoch's seconds.
    assert 0 < started < float(Path("/proc/uptime").read_text().split()[0])
    time.sleep(0.05)
    clock.mark("first")
    clock.mark("second")
    time.sleep(0.02)
    clock.mark("first")  # a part marked twice adds up
    assert list(clock.parts) == ["interpreter", "first", "second"]
    assert clock.parts["first"] >= 0.07 and clock.parts["second"] < 0.02
    assert clock.total() == pytest.approx(sum(clock.parts.values()))


def test_a_resumed_run_adds_each_invocations_parts():
    first = added_parts(None, {"interpreter": 0.1, "mlflow_import": 2.0})
    assert first == {"interpreter": 0.1, "mlflow_import": 2.0}
    assert added_parts(first, {"interpreter": 0.2004, "gpu_readings": 0.5}) == {
        "interpreter": 0.3,
        "mlflow_import": 2.0,
        "gpu_readings": 0.5,
    }
