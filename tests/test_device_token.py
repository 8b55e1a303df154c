"""The device-work token: shared holders run side by side, a measurement holds the device alone,
a waiting measurement is not starved, and the executors' clock stops while a worker waits for it.

Real flocks on real files (each ``DeviceToken`` opens its own descriptors, so holders in one
process contend exactly as holders in separate processes do). Every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.executors.base import ExecutorSettings, wait_for_worker
from runner.worker.device_token import (
    EXCLUSIVE,
    ISOLATE_MEASUREMENTS,
    SHARED,
    TOLD_POLL_S,
    WAIT_STAGE,
    DeviceToken,
    context_lock_of,
    create_token_files,
    device_token,
    one_context_at_a_time,
    token_windows,
)


@pytest.fixture()
def token(tmp_path: Path) -> Path:
    return create_token_files(tmp_path / "gpu-0.work")


def _hold_in_thread(path: Path, mode: str, seconds: float, record: dict) -> threading.Thread:
    def hold():
        with device_token(path, mode, record):
            time.sleep(seconds)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def _overlaps(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_shared_holders_overlap_and_an_exclusive_one_overlaps_nobody(token: Path):
    records = [{}, {}, {}]
    threads = [_hold_in_thread(token, SHARED, 0.4, records[0]), _hold_in_thread(token, SHARED, 0.4, records[1])]
    time.sleep(0.1)
    threads.append(_hold_in_thread(token, EXCLUSIVE, 0.2, records[2]))
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    (first,), (second,), (alone,) = (token_windows(r) for r in records)
    assert _overlaps(first, second), "two shared holders should run side by side"
    assert alone[2] == EXCLUSIVE and not _overlaps(alone, first) and not _overlaps(alone, second)
    assert records[2]["waited_s"] > 0.1  # it waited for both shared holders


def test_a_waiting_measurement_is_not_starved_by_shared_holders(token: Path):
    """Shared holders keep coming (each asks while another holds the token); the exclusive asker
    gets its turn once the holders that were there before it are done."""
    stop = threading.Event()
    shared_windows: list = []

    def churn():
        while not stop.is_set():
            record: dict = {}
            with device_token(token, SHARED, record):
                time.sleep(0.15)
            shared_windows.extend(token_windows(record))

    churners = [threading.Thread(target=churn, daemon=True) for _ in range(2)]
    for thread in churners:
        thread.start()
        time.sleep(0.07)  # staggered, so the token is never free of shared holders
    exclusive: dict = {}
    asked = time.time()
    waiter = _hold_in_thread(token, EXCLUSIVE, 0.05, exclusive)
    waiter.join(timeout=5)
    stop.set()
    for thread in churners:
        thread.join(timeout=5)
    assert not waiter.is_alive(), "the exclusive holder was starved"
    ((start, end, _),) = token_windows(exclusive)
    assert start - asked < 1.0
    assert not any(_overlaps((start, end), window) for window in shared_windows)


def test_after_its_measurement_a_holder_steps_down_without_queueing_behind_the_next(token: Path):
    """The checks after timing (shared) start at once although the next measurement already waits
    (holding the turnstile); that measurement starts once those checks are done."""
    record: dict = {}
    waiting: dict = {}
    with DeviceToken(token, record) as held:
        held.hold(EXCLUSIVE)
        next_one = _hold_in_thread(token, EXCLUSIVE, 0.0, waiting)
        time.sleep(0.3)  # the next measurement is queued now
        asked = time.time()
        held.hold(SHARED)
        assert time.time() - asked < 0.2, "stepping down queued behind the waiting measurement"
        time.sleep(0.2)
        assert next_one.is_alive()  # still waiting for the shared holder
    next_one.join(timeout=5)
    assert not next_one.is_alive()
    _, checks_end, _ = token_windows(record)[-1]
    ((next_start, _, _),) = token_windows(waiting)
    assert [mode for _, _, mode in token_windows(record)] == [EXCLUSIVE, SHARED]
    assert next_start >= checks_end


def test_switching_modes_records_each_window(token: Path):
    record: dict = {}
    with DeviceToken(token, record) as held:
        held.hold(SHARED)
        held.hold(SHARED)  # already held: no new window
        held.hold(EXCLUSIVE)
        held.hold(SHARED)
    modes = [mode for _, _, mode in token_windows(record)]
    assert modes == [SHARED, EXCLUSIVE, SHARED]
    assert record["path"] == str(token)
    windows = token_windows(record)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))
    with pytest.raises(ValueError, match="device token mode"):
        DeviceToken(token).hold("whenever")


def _approach_then_measure(path: Path, record: dict, log: list, isolation: str = "device") -> threading.Thread:
    """A worker's way to its turn in a thread: approach, a 0.15 s warm-up, the turn, 0.05 s of samples."""

    def measure():
        with DeviceToken(path, record, isolation) as held:
            held.approach()
            log.append(("warm-up", time.time()))
            time.sleep(0.15)
            held.hold(EXCLUSIVE)
            log.append(("turn", time.time()))
            time.sleep(0.05)

    thread = threading.Thread(target=measure, daemon=True)
    thread.start()
    return thread


def test_the_warm_up_runs_beside_the_last_measurements_checks_and_the_samples_alone(token: Path):
    """While a measurement runs, the next one's approach waits; once the first steps down to its checks after
    timing, the next warms up beside them (no waiting for them), and its turn starts once they are done. A
    shared holder asking after the approach began waits until that turn is over: no newcomer gets in."""
    first: dict = {}
    following: dict = {}
    newcomer: dict = {}
    log: list = []
    with DeviceToken(token, first) as held:
        held.hold(EXCLUSIVE)
        next_one = _approach_then_measure(token, following, log)
        time.sleep(0.2)
        assert not log, "the warm-up began beside a measurement"
        held.hold(SHARED)  # the checks after timing
        stepped_down = time.time()
        deadline = time.time() + 5
        while not log and time.time() < deadline:
            time.sleep(0.005)
        # The checks last 0.4 s more: a warm-up that waited for them would begin that late.
        assert log and log[0][0] == "warm-up" and log[0][1] - stepped_down < 0.25, "the warm-up waited for the checks"
        late = _hold_in_thread(token, SHARED, 0.0, newcomer)
        time.sleep(0.4)  # past the warm-up (0.15 s): the turn waits for these checks
        assert [step for step, _ in log] == ["warm-up"] and late.is_alive()
    next_one.join(timeout=5)
    late.join(timeout=5)
    assert not next_one.is_alive() and not late.is_alive()
    checks = token_windows(first)[-1]
    warm, turn = token_windows(following)
    (joined,) = token_windows(newcomer)
    assert (warm[2], turn[2]) == (SHARED, EXCLUSIVE)
    assert _overlaps(warm, checks) and turn[0] >= checks[1], "the samples ran beside the checks"
    assert joined[0] >= turn[1], "a shared holder came in between the approach and the turn"


def test_an_approach_given_up_lets_others_in(token: Path):
    """A measurement that fails in its warm-up goes back to shared (``hold(SHARED)``) or lets go: either way
    the turnstile is free again, and under measurement isolation no lock is left that a measurement waits for."""
    record: dict = {}
    with DeviceToken(token, record) as held:
        held.approach()
        held.hold(SHARED)
        shared: dict = {}
        other = _hold_in_thread(token, SHARED, 0.0, shared)
        other.join(timeout=2)
        assert not other.is_alive(), "the turnstile stayed taken"
        held.approach()
    after: dict = {}
    measurement = _hold_in_thread(token, EXCLUSIVE, 0.0, after)
    measurement.join(timeout=2)
    assert not measurement.is_alive(), "letting go left the token or the turnstile held"
    assert [mode for _, _, mode in token_windows(record)] == [SHARED, SHARED]
    with DeviceToken(token, {}, ISOLATE_MEASUREMENTS) as held:
        held.approach()
        held.hold(SHARED)
        measurement = _hold_isolating_measurements(token, EXCLUSIVE, 0.0, {})
        measurement.join(timeout=2)
        assert not measurement.is_alive(), "shared work under measurement isolation kept a lock"
        held.hold(EXCLUSIVE)
        with pytest.raises(RuntimeError, match="approach"):
            held.approach()


def test_under_measurement_isolation_the_warm_up_still_waits_out_a_measurement(token: Path):
    record: dict = {}
    following: dict = {}
    log: list = []
    with DeviceToken(token, record, ISOLATE_MEASUREMENTS) as held:
        held.hold(EXCLUSIVE)
        next_one = _approach_then_measure(token, following, log, ISOLATE_MEASUREMENTS)
        time.sleep(0.2)
        assert not log, "the warm-up began beside a measurement"
    next_one.join(timeout=5)
    assert not next_one.is_alive() and [step for step, _ in log] == ["warm-up", "turn"]
    _, turn = token_windows(following)
    assert turn[0] >= token_windows(record)[-1][1]


def _hold_isolating_measurements(path: Path, mode: str, seconds: float, record: dict) -> threading.Thread:
    def hold():
        with DeviceToken(path, record, ISOLATE_MEASUREMENTS) as held:
            held.hold(mode)
            time.sleep(seconds)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_isolating_measurements_only_lets_unmeasured_work_run_beside_a_measurement(token: Path):
    """executor.measurement_isolation=measurements: a measurement does not wait for shared holders
    (their work runs beside it), but two measurements still never overlap."""
    records = [{} for _ in range(4)]
    threads = [_hold_isolating_measurements(token, SHARED, 0.6, records[0])]
    time.sleep(0.1)
    threads.append(_hold_isolating_measurements(token, EXCLUSIVE, 0.3, records[1]))
    threads.append(_hold_isolating_measurements(token, EXCLUSIVE, 0.3, records[2]))
    time.sleep(0.1)
    threads.append(_hold_isolating_measurements(token, SHARED, 0.1, records[3]))
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    (shared,), (first,), (second,), (late_shared,) = (token_windows(r) for r in records)
    assert first[2] == second[2] == EXCLUSIVE
    assert not _overlaps(first, second), "two measurements overlapped"
    assert _overlaps(shared, first) or _overlaps(shared, second), "a measurement waited for a shared holder"
    assert records[3]["waited_s"] < 0.1, "a shared holder waited for a measurement"
    assert _overlaps(late_shared, first) or _overlaps(late_shared, second)
    assert records[1]["isolation"] == ISOLATE_MEASUREMENTS
    with pytest.raises(ValueError, match="measurement isolation"):
        DeviceToken(token, {}, "none")


def test_a_measurement_steps_down_to_unlocked_shared_work(token: Path):
    """Under measurement isolation, stepping down lets go of the lock: the next measurement starts
    while the first one's checks after timing still run."""
    record: dict = {}
    following: dict = {}
    with DeviceToken(token, record, ISOLATE_MEASUREMENTS) as held:
        held.hold(EXCLUSIVE)
        next_one = _hold_isolating_measurements(token, EXCLUSIVE, 0.0, following)
        time.sleep(0.2)
        assert next_one.is_alive()  # waits for the measurement
        held.hold(SHARED)
        next_one.join(timeout=5)
        assert not next_one.is_alive(), "the next measurement waited for the checks after timing"
    assert [mode for _, _, mode in token_windows(record)] == [EXCLUSIVE, SHARED]


def test_no_token_path_holds_nothing():
    record: dict = {}
    with DeviceToken(None, record) as held:
        held.hold(EXCLUSIVE)
    assert record == {}


def test_a_dead_holder_lets_go(token: Path):
    """The kernel drops a flock when its holder dies: a killed worker never wedges the device."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from runner.worker.device_token import DeviceToken, EXCLUSIVE; "
            f"t = DeviceToken({str(token)!r}); t.hold(EXCLUSIVE); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        holder.kill()
        holder.wait(timeout=10)
        record: dict = {}
        done = _hold_in_thread(token, EXCLUSIVE, 0.0, record)
        done.join(timeout=5)
        assert not done.is_alive()
    finally:
        holder.kill()


def test_workers_make_their_contexts_one_after_another_and_a_dead_one_lets_go(token: Path):
    """The context lock: three processes that ask for it at once hold it one after another, each window apart from
    the others, and those that came later say how long they waited; a holder killed inside it does not keep the
    next one out. Bounded: three short-lived processes, each holding the lock 0.3 s, every wait capped."""
    code = (
        "import json, sys, time\n"
        "from runner.worker.device_token import one_context_at_a_time\n"
        "record = {}\n"
        "print('asking', flush=True)\n"
        f"with one_context_at_a_time({str(token)!r}, record):\n"
        "    time.sleep(float(sys.argv[1]))\n"
        "print(json.dumps(record), flush=True)\n"
    )
    holders = [
        subprocess.Popen([sys.executable, "-c", code, "0.3"], stdout=subprocess.PIPE, text=True) for _ in range(3)
    ]
    try:
        records = [json.loads(holder.communicate(timeout=30)[0].splitlines()[-1]) for holder in holders]
    finally:
        for holder in holders:
            holder.kill()
    windows = sorted(record["window"] for record in records)
    assert all(end - start >= 0.3 for start, end in windows)
    assert all(earlier[1] <= later[0] for earlier, later in zip(windows, windows[1:])), windows
    assert sorted(record["waited_s"] for record in records)[-1] >= 0.5  # the last waited for two others

    stuck = subprocess.Popen([sys.executable, "-c", code, "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert stuck.stdout.readline().strip() == "asking"
        time.sleep(0.5)  # it holds the lock now (nothing else asks for it)
        stuck.kill()
        stuck.wait(timeout=10)
        after: dict = {}

        def take() -> None:
            with one_context_at_a_time(token, after):
                pass

        done = threading.Thread(target=take, daemon=True)
        done.start()
        done.join(timeout=5)
        assert not done.is_alive() and after["waited_s"] < 5
    finally:
        stuck.kill()


def test_without_a_context_lock_file_or_token_a_context_is_made_without_it(tmp_path: Path):
    """A token made by an older kbench has no context lock beside it; a run without a token has none at all: the
    context is made without the lock, and the record says why."""
    older = tmp_path / "gpu-0.work"
    create_token_files(older)
    context_lock_of(older).unlink()
    records: list[dict] = [{}, {}]
    with one_context_at_a_time(older, records[0]):
        pass
    with one_context_at_a_time(None, records[1]):
        pass
    assert "FileNotFoundError" in records[0]["not taken"]
    assert records[1] == {"not taken": "no device token"}


def _worker_script(marker: Path, waiting_s: float, running_s: float) -> list[str]:
    """A stand-in worker: waits for its measurement's turn for ``waiting_s``, then runs for ``running_s``."""
    code = (
        "import pathlib, sys, time\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        f"marker.write_text({WAIT_STAGE!r}); time.sleep({waiting_s})\n"
        f"marker.write_text('timing'); time.sleep({running_s})\n"
    )
    return [sys.executable, "-c", code]


def _wait(process: subprocess.Popen):
    def wait_until(deadline: float):
        try:
            return process.wait(timeout=max(0.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            return None

    return wait_until


@pytest.mark.parametrize("in_flight, timed_out", [(2, False), (1, True)])
def test_the_time_limit_stops_while_the_worker_waits_for_its_turn(tmp_path: Path, in_flight: int, timed_out: bool):
    """Waiting 4 s for the device, then running 0.5 s, under a 3 s limit: with another evaluation
    in flight the wait is not the worker's time; alone, nothing could have kept it waiting. (The limit leaves the
    interpreter's start 2.5 s: with 1.5 s, CI's busy host once took it past the limit.)"""
    marker = tmp_path / "stage"
    process = subprocess.Popen(_worker_script(marker, 4.0, 0.5))
    try:
        settings = ExecutorSettings(timeout_s=3.0, in_flight=in_flight)
        status, was_timed_out, never_started = wait_for_worker(_wait(process), marker, time.perf_counter(), settings)
        assert (was_timed_out, never_started) == (timed_out, False)
        assert (status == 0) is not timed_out
    finally:
        process.kill()
        process.wait()


def test_a_newcomer_waits_at_the_ready_gate_while_a_measurement_is_ready(token: Path):
    """A newcomer's first shared phases do not cut in between two ready measurements: with B and D ready
    (queued for their turns) and C new, C's shared window opens only once D's turn has begun, though C
    asked before D did (f34: 27 gaps of a single newcomer's first phases while measurements were ready).
    Without the gate C queues on the turnstile ahead of D and takes the token between B's turn and D's."""
    a = DeviceToken(token, {})
    a.hold(EXCLUSIVE)  # a measurement in its turn
    records = {name: {} for name in "BCD"}

    def measurement(name: str, seconds: float) -> None:
        with DeviceToken(token, records[name]) as holder:
            holder.approach()  # ready: queued for its turn, the warm-up would run here
            holder.hold(EXCLUSIVE)
            time.sleep(seconds)

    def newcomer() -> None:
        with DeviceToken(token, records["C"]) as holder:
            holder.hold(SHARED)
            time.sleep(0.05)

    threads = []
    for target, args in ((measurement, ("B", 0.3)), (newcomer, ()), (measurement, ("D", 0.2))):
        threads.append(threading.Thread(target=target, args=args, daemon=True))
        threads[-1].start()
        time.sleep(0.15)  # B queued, then C, then D
    a.release()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    a.close()
    b_turn = next(w for w in token_windows(records["B"]) if w[2] == EXCLUSIVE)
    d_turn = next(w for w in token_windows(records["D"]) if w[2] == EXCLUSIVE)
    (c_window,) = token_windows(records["C"])
    assert b_turn[1] <= d_turn[0], "B was ready first and measures first"
    assert c_window[0] >= d_turn[0], f"the newcomer came in before the ready measurement D: {c_window} {d_turn}"
    assert records["C"]["waited_s"] > 0.3  # it waited at the gate through B's turn and D's


def _a_warm_up_beside_two_ready(token: Path, cuts_in, before_a_ends=None):
    """A holds its turn; B, then D get ready (``approach``, their own warm-up 0.1 s in it, their turns 0.3 s), then a
    warm-up C asks for a 0.3 s shared window (``cuts_in``); ``before_a_ends`` runs, then A's turn ends. Returns the
    turns of A, B and D, C's window and C's record, each checked against C's window for overlap."""
    a = DeviceToken(token, {})
    a.hold(EXCLUSIVE)
    records = {name: {} for name in "ABCD"}
    records["A"] = a.record

    def measurement(name: str, seconds: float) -> None:
        with DeviceToken(token, records[name]) as holder:
            holder.approach()
            time.sleep(0.1)  # the measurement's own warm-up, which runs in its approach (timing.measure_pair)
            holder.hold(EXCLUSIVE)
            time.sleep(seconds)

    def warm_up() -> None:
        with DeviceToken(token, records["C"], cuts_in=cuts_in) as holder:
            holder.hold(SHARED)
            time.sleep(0.3)

    threads = []
    for target, args in ((measurement, ("B", 0.3)), (measurement, ("D", 0.3)), (warm_up, ())):
        threads.append(threading.Thread(target=target, args=args, daemon=True))
        threads[-1].start()
        time.sleep(0.15)  # B ready, then D, then the warm-up asks
    if before_a_ends is not None:
        before_a_ends()
    a.release()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    a.close()
    turns = {name: next(w for w in token_windows(records[name]) if w[2] == EXCLUSIVE) for name in "ABD"}
    (c_window,) = token_windows(records["C"])
    for name, turn in turns.items():
        assert not _overlaps(c_window, turn), f"the warm-up's window overlapped {name}'s turn"
    return turns, c_window, records["C"]


def test_a_warm_up_beside_the_sweep_cuts_in_but_never_beside_a_measurement(token: Path):
    """A compile warm-up's shared window (``cuts_in``) waits for the measurement in its turn (A), not for the
    ready ones queued behind it (B, D): it opens when A's turn ends, beside B's approach (where B's own warm-up
    runs), and B's turn waits for it. Gated like a newcomer it waited for B's turn and D's (H200: 4,086 of 5,130 s
    of the warm-ups' time)."""
    turns, c_window, record = _a_warm_up_beside_two_ready(token, True)
    assert c_window[0] < turns["B"][0] and c_window[0] - turns["A"][1] < 0.25, f"it waited past A's turn: {turns}"
    assert record["waited_s"] < 0.4
    assert turns["B"][0] >= c_window[1], "B's turn waited for the warm-up's window"


@pytest.mark.parametrize("told", [False, True])
def test_a_warm_up_told_when_to_cut_in_waits_at_the_ready_gate_until_then(token: Path, told: bool):
    """A warm-up's window that cuts in only once told (``cuts_in`` a question, asked while it waits): not told, it
    waits at the ready gate while measurements are ready (B, D) and opens after the last of their turns, as a
    newcomer's first phase does; told while it waits, it cuts in when the turn of the moment (A) ends, before B's."""
    told_now = threading.Event()

    def tell() -> None:
        told_now.set()
        time.sleep(5 * TOLD_POLL_S)  # asked again meanwhile

    turns, c_window, _ = _a_warm_up_beside_two_ready(token, told_now.is_set, tell if told else None)
    if told:
        assert turns["A"][1] <= c_window[0] < turns["B"][0], (c_window, turns)
        assert turns["B"][0] >= c_window[1], "B's turn waited for the warm-up's window"
    else:
        assert c_window[0] >= max(turns["B"][1], turns["D"][1]), (c_window, turns)
