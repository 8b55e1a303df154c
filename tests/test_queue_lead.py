"""The CUDA sampler's leads (``samplers.QueueLead``, ``CudaSampler.launch``) on a simulated stream.

This machine has no GPU, so ``torch.cuda``'s events, sleep and synchronisation are a test double at that boundary
(``_SimulatedStream``, named as such): one stream whose work runs in order, each piece from when it was queued or when
the work before it ended, whichever is later, on a host clock that only the calls move. The sampler's own code runs as
it is; on a GPU, ``tests/test_gpu.py``'s ``test_a_sample_after_a_call_that_waits_for_the_device_is_led...`` measures the
same thing for real.
"""

from __future__ import annotations

import contextlib
import types

import pytest
import torch

from runner.worker import samplers
from runner.worker.samplers import CudaSampler, run_batch


class _SimulatedStream:
    """Test double for one CUDA stream and the host that feeds it (no GPU here): ``host_ms`` moves only where a call
    spends host time or waits; queued work starts at the later of its queueing and the end of the work before it.
    ``cycles_per_ms`` is the SM clock ``torch.cuda._sleep`` counts. An event recorded on an idle stream is done
    ``EVENT_LATENCY_MS`` after its record (the GPU gets to it a few microseconds later), so asked at once it is not
    done yet, as on the H200 where a sample right after a call that had synchronised often went unled by the dry-queue
    test that came before ``QueuedWork`` (BENCHMARKS.md, fifty-ninth session)."""

    EVENT_LATENCY_MS = 0.005

    def __init__(self, cycles_per_ms: float) -> None:
        self.host_ms = 0.0
        self.free_at = 0.0  # when the work queued so far ends
        self.events_done_at = 0.0  # when the events recorded so far are done
        self.cycles_per_ms = cycles_per_ms

    def queue(self, gpu_ms: float) -> float:
        self.free_at = max(self.free_at, self.host_ms) + gpu_ms
        return self.free_at

    def synchronize(self, device=None) -> None:
        self.host_ms = max(self.host_ms, self.free_at, self.events_done_at)

    def sleep(self, cycles: int) -> None:
        self.queue(cycles / self.cycles_per_ms)

    def event_class(self):
        stream = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.at = self.done_at = None

            def record(self) -> None:
                self.at = stream.queue(0.0)
                self.done_at = max(self.at, stream.host_ms + stream.EVENT_LATENCY_MS)
                stream.events_done_at = max(stream.events_done_at, self.done_at)

            def query(self) -> bool:
                return self.at is None or self.done_at <= stream.host_ms

            def synchronize(self) -> None:
                stream.host_ms = max(stream.host_ms, self.done_at)

            def elapsed_time(self, end) -> float:
                return end.at - self.at

        return Event


@pytest.fixture
def stream(monkeypatch):
    """The simulated stream in place of ``torch.cuda``'s (and of the sampler's host clock), at 1,980 MHz."""
    simulated = _SimulatedStream(cycles_per_ms=1.98e6)
    monkeypatch.setattr(torch.cuda, "Event", simulated.event_class())
    monkeypatch.setattr(torch.cuda, "_sleep", simulated.sleep)
    monkeypatch.setattr(torch.cuda, "synchronize", simulated.synchronize)
    monkeypatch.setattr(torch.cuda, "device", lambda device=None: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(L2_cache_size=0))
    monkeypatch.setattr(samplers, "time", types.SimpleNamespace(perf_counter_ns=lambda: int(simulated.host_ms * 1e6)))
    return simulated


def _calls(stream: _SimulatedStream):
    """A side that takes the host 1 ms to queue 2 ms of GPU work, and one that queues 2 ms and waits for them (as
    ``torch.linalg.cholesky`` waits to check its result)."""

    def host_paced():
        stream.host_ms += 1.0
        stream.queue(2.0)

    def waits_for_the_device():
        stream.queue(2.0)
        stream.synchronize()

    return {"candidate": host_paced, "reference": waits_for_the_device}


def _interleaved(sampler, calls, batches: int) -> tuple[list[float], list[float], list[list[int]]]:
    """``batches`` batches of the timing loop's kind of order (here: reference, candidate, alternating): the host-paced
    side's samples, the waiting side's, and each batch's led positions."""
    order = ["reference", "candidate"] * 5
    paced, waiting, led = [], [], []
    for _ in range(batches):
        handle = sampler.launch([calls[side] for side in order], order)
        sampler.close(handle)
        times, _ = sampler.times(handle)
        paced += [t for side, t in zip(order, times) if side == "candidate"]
        waiting += [t for side, t in zip(order, times) if side == "reference"]
        led.append(sampler.led(handle)[0])
    return paced, waiting, led


def test_after_a_call_that_waits_for_the_device_a_led_sample_takes_its_gpu_time_not_the_hosts(stream):
    """Without leads every host-paced sample after the waiting side's finds the queue empty and takes 3 ms (its
    host's 1 ms in it); led, it takes its 2 ms of GPU work, once the side has a host and a GPU time (its first batch
    has none, and is not led). The waiting side's samples take 2 ms either way."""
    calls = _calls(stream)
    unled, unled_waiting, nothing = _interleaved(CudaSampler(torch.device("cuda"), False, False, 2.0), calls, 3)
    assert unled == pytest.approx([3.0] * 15) and unled_waiting == pytest.approx([2.0] * 15)
    assert nothing == [[], [], []]

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    paced, waiting, led = _interleaved(sampler, calls, 3)
    assert paced[:5] == pytest.approx([3.0] * 5) and led[0] == []  # no history yet
    assert paced[5:] == pytest.approx([2.0] * 10) and waiting == pytest.approx([2.0] * 15)
    assert led[1] and set(led[1]) >= {1, 3, 5, 7, 9}  # every candidate sample, each after a waiting call
    assert sampler.leads.lead_ms("candidate") == pytest.approx(1.0)
    # The waiting side's host time (2 ms) covers its GPU time: probed, it waits, and it is not led.
    assert sampler.leads.waits == {"reference": True} and sampler.leads.lead_ms("reference") == 0.0


def test_a_run_of_one_sides_samples_is_not_led_after_its_first(stream):
    """A side whose calls keep the queue filled (the host 1 ms ahead of each call's 2 ms) finds it run dry only at a
    batch's start, after the synchronisation that closed the last: that sample alone is led."""
    calls = _calls(stream)
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    for _ in range(2):
        run_batch(sampler, [calls["candidate"]] * 10, labels=["candidate"] * 10)
    handle = sampler.launch([calls["candidate"]] * 10, ["candidate"] * 10)
    sampler.close(handle)
    times, _ = sampler.times(handle)
    assert sampler.led(handle)[0] == [0] and times == pytest.approx([2.0] * 10)


def test_the_sleeps_rate_is_read_again_from_every_batchs_leads(stream):
    """``torch.cuda._sleep`` counts SM cycles: read at one clock (here 495 MHz, by the sampler and again by its wait
    probe), the rate makes the leads 4 times too short once the clock is at 1,980 MHz; the events around each lead give
    the rate they ran at, and the next batch's leads last as long as asked. ``led`` reports each batch's leads as the
    events timed them."""
    calls = _calls(stream)
    stream.cycles_per_ms = 0.495e6
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    _interleaved(sampler, calls, 2)  # the history, then the probe (the reference waits) and leads at this clock
    assert sampler.leads.waits == {"reference": True}
    stream.cycles_per_ms = 1.98e6
    order = ["reference", "candidate"] * 5
    handle = sampler.launch([calls[side] for side in order], order)
    sampler.close(handle)
    sampler.times(handle)
    positions, slept_ms = sampler.led(handle)
    assert positions == [1, 3, 5, 7, 9]  # the candidate's samples alone, each after a waiting call
    assert slept_ms / len(positions) == pytest.approx(0.25, rel=1e-4)  # 1 ms asked (whole cycles)
    handle = sampler.launch([calls[side] for side in order], order)
    sampler.close(handle)
    times, _ = sampler.times(handle)
    positions, slept_ms = sampler.led(handle)
    assert positions == [1, 3, 5, 7, 9] and slept_ms == pytest.approx(5 * sampler.leads.lead_ms("candidate"), rel=1e-5)
    assert times[1::2] == pytest.approx([2.0] * 5)


def test_a_side_that_waits_for_the_device_is_found_once_and_its_samples_keep_their_time_unled(stream):
    """batched_solve_small_fp32's kind (sixtieth session): both sides wait for the device inside their calls. Led,
    every sample slept its whole GPU time ahead (the host's time covers it) and took the same time; probed once, in
    the first batch with a history, neither side is led, no sleep is spent, and the samples keep their 2 ms."""

    def waits():
        stream.queue(2.0)
        stream.synchronize()

    calls = {"reference": waits, "candidate": waits}
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    probes = []
    probe = sampler._probe_waits
    sampler._probe_waits = lambda fn, label: probes.append(label) or probe(fn, label)
    candidate, reference, led = _interleaved(sampler, calls, 3)
    assert sorted(probes) == ["candidate", "reference"]  # once each, whatever the batches after
    assert sampler.leads.waits == {"reference": True, "candidate": True}
    assert led == [[], [], []] and candidate + reference == pytest.approx([2.0] * 30)
    assert sampler.leads.lead_ms("reference") == sampler.leads.lead_ms("candidate") == 0.0


def test_a_launch_bound_side_does_not_wait_and_stays_led(stream):
    """A side whose host takes 1.8 ms to queue ten 0.1 ms kernels (a block of small launches) holds the host about as
    long as its GPU work on an empty queue, as a waiting one does, so it is probed; behind the probe's sleep it returns
    before the sleep ends, so it does not wait and is still led: behind its lead its samples take their GPU time, 1 ms,
    not the host's 1.8."""

    def launch_bound():
        for _ in range(10):
            stream.host_ms += 0.18
            stream.queue(0.1)

    calls = {"reference": launch_bound, "candidate": launch_bound}
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    unled, _, _ = _interleaved(sampler, calls, 1)
    assert unled[1:] == pytest.approx([1.8] * 4)
    assert sampler.leads.to_probe("candidate")
    later, _, led = _interleaved(sampler, calls, 3)
    assert sampler.leads.waits == {"reference": False, "candidate": False}
    assert led[-1] and later[-4:] == pytest.approx([1.0] * 4, abs=0.05)


def test_the_probe_takes_its_tries_again_where_its_sleeps_ran_short(stream):
    """A side that queues 2 ms in 1.6 ms of host time and does not wait. Its probe's sleeps asked at a rate read at
    345 MHz run 5.7 times shorter at 1,980: the host outlasts them, and it would look as if it waited; the events give
    the rate they ran at, the tries are taken again at it, and the side is found not to wait."""

    def quick():
        stream.host_ms += 1.6
        stream.queue(2.0)

    stream.cycles_per_ms = 0.345e6
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    stream.cycles_per_ms = 1.98e6
    run_batch(sampler, [quick] * 4, labels=["candidate"] * 4)
    assert sampler.leads.to_probe("candidate")
    assert sampler._probe_waits(quick, "candidate") is False
    assert sampler._cycles_per_ms == pytest.approx(1.98e6)


def test_a_sample_behind_less_work_than_its_host_takes_to_queue_is_led_by_the_difference(stream):
    """sort_moe_expert_ids_stable_int32 in a cold torch_compile pass (fifty-ninth session): both sides 0.23 ms on the
    GPU, the candidate's host slowed by the compiles beside (here 0.4 ms to queue it, the reference 0.1 ms). Neither
    waits for the device and the queue never runs dry after a batch's first sample, but behind a reference sample it
    holds less than the candidate's host time: unled, the candidate takes 0.27 ms (0.4 at a batch's start); led by
    what the queue lacks, 0.23 ms. The reference's samples are led only where what is ahead is counted low (the
    oldest sample's least), never at positions 4 and 6 here, and take 0.23 ms either way."""

    def quick():
        stream.host_ms += 0.1
        stream.queue(0.23)

    def slow_to_queue():
        stream.host_ms += 0.4
        stream.queue(0.23)

    calls = {"reference": quick, "candidate": slow_to_queue}
    unled, quick_unled, _ = _interleaved(CudaSampler(torch.device("cuda"), False, False, 2.0), calls, 4)
    assert unled[1:5] == pytest.approx([0.27] * 4)
    assert [t for i, t in enumerate(quick_unled) if i % 5] == pytest.approx([0.23] * 16)  # 0.33 at a batch's start

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    slow, quick_led, led = _interleaved(sampler, calls, 4)
    assert led[0] == []  # no history yet
    # From the second batch on, the candidate's samples after the batch's first take its GPU time (within 0.02 ms: a
    # lead read from a median still moving); the first, behind the batch's first (led) reference sample, is led as far
    # as its lead goes (its side's GPU time), and candidate samples behind reference ones are led.
    later = [t for batch in range(1, 4) for t in slow[batch * 5 + 1 : batch * 5 + 5]]
    assert later == pytest.approx([0.23] * 12, abs=0.021)
    assert all(0.23 <= slow[batch * 5] < 0.41 for batch in range(1, 4))
    assert quick_led[5:] == pytest.approx([0.23] * 15, abs=1e-5)
    assert all(0 in positions and not {4, 6} & set(positions) for positions in led[1:])
    assert any({3, 5, 7, 9} & set(positions) for positions in led[1:])


def test_the_timing_loop_queues_each_batch_behind_the_last_so_the_gpu_never_waits_between_them(stream):
    """``timing.measure_pair`` on the simulated stream: a batch without an audit call is closed by its last end event
    once the next batch is queued behind it, so that next batch's first sample starts where the last one's ended
    (no gap, no lead: the queue holds the last batch's work); a batch with an audit call is closed, the device waited
    for, before the next is queued, which then starts on an empty queue and is led. Both sides take the host 0.1 ms
    to queue 0.5 ms of GPU work. Each batch's window starts where the one it was queued behind was closed, so windows
    do not overlap."""
    from runner.worker import timing as timing_module
    from runner.worker.clocks import ClockMonitor
    from runner.worker.protocol import TimingSettings

    def call():
        stream.host_ms += 0.1
        stream.queue(0.5)

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    read = []  # per batch read, when its first sample started and its last one ended, and whether it audited
    times = sampler.times

    def recording_times(handle):
        pairs = handle["pairs"]
        read.append((pairs[0][0].at, pairs[handle["samples"] - 1][1].at, handle["audited"]))
        return times(handle)

    sampler.times = recording_times  # the events are reused every other batch: read as the loop reads them
    settings = TimingSettings(min_samples=400, max_samples=400, batch=10, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(sampler, ClockMonitor(None))
    timing, raw = timing_module.measure_pair(call, call, torch.device("cuda"), settings, "small", 5, tools=tools)
    assert len(raw["batch_window"]) == 40 and timing.reference.median_ms == pytest.approx(0.5)
    assert timing.audit_recheck is None  # no batches after the measured ones
    batches = read[-40:]
    behind, after_audit = 0, 0
    for (_, ended, audited), (started, _, _), positions, gap in zip(
        batches, batches[1:], raw["batch_led"][1:], raw["batch_gap_before_ms"][1:]
    ):
        assert gap == pytest.approx(started - ended)  # the sampler's own reading of the gap
        if audited:
            after_audit += 1
            assert started - ended >= 0.5 and 0 in positions  # the audit call, then an empty queue: led
        else:
            behind += 1
            assert started == pytest.approx(ended) and 0 not in positions
    assert behind >= 20 and after_audit >= 2 * timing_module.MIN_AUDITS - 1
    windows = raw["batch_window"]
    assert all(earlier[1] <= later[0] <= later[1] for earlier, later in zip(windows, windows[1:]))
