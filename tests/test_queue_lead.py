"""The CUDA sampler's leads (``queue_lead.QueueLead``, ``CudaSampler.launch``) on a simulated stream.

This machine has no GPU, so ``torch.cuda``'s events, sleep and synchronisation are a test double at that boundary
(``_SimulatedStream``, named as such): one stream whose work runs in order, each piece from when it was queued or when
the work before it ended, whichever is later, on a host clock that only the calls move. The sampler's own code runs as
it is; on a GPU, ``tests/test_gpu.py``'s ``test_a_sample_after_a_call_that_waits_for_the_device_is_led...`` measures the
same thing for real.
"""

from __future__ import annotations

import collections
import contextlib
import types

import pytest
import torch

from runner.worker import queue_lead, samplers, sync_audits
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
        # Where set, the launch queue holds this many pieces of work (kernels, sleeps, event records) not yet done: one
        # more is queued only once the GPU has finished the one that many back, the host waiting until then.
        self.launch_slots: int | None = None
        self._ends: collections.deque = collections.deque()  # each queued piece's end, while ``launch_slots`` is set
        self.free_at = 0.0  # when the work queued so far ends
        self.side_free_at = (
            0.0  # when the work left on another stream ends: no event waits for it, a synchronisation does
        )
        self.events_done_at = 0.0  # when the events recorded so far are done
        self.cycles_per_ms = cycles_per_ms

    def clock(self) -> types.SimpleNamespace:
        """The ``time`` module's clocks on this stream's host clock (epoch seconds from 0)."""
        return types.SimpleNamespace(
            perf_counter_ns=lambda: int(self.host_ms * 1e6),
            perf_counter=lambda: self.host_ms / 1000.0,
            time=lambda: self.host_ms / 1000.0,
        )

    def queue(self, gpu_ms: float) -> float:
        if self.launch_slots is not None:
            while len(self._ends) >= self.launch_slots:
                self.host_ms = max(self.host_ms, self._ends.popleft())  # a full queue: wait for room
            while self._ends and self._ends[0] <= self.host_ms:
                self._ends.popleft()
        self.free_at = max(self.free_at, self.host_ms) + gpu_ms
        if self.launch_slots is not None:
            self._ends.append(self.free_at)
        return self.free_at

    def synchronize(self, device=None) -> None:
        self.host_ms = max(self.host_ms, self.free_at, self.events_done_at, self.side_free_at)

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
                if max(self.done_at, end.done_at) > stream.host_ms:  # as CUDA's: not before both are reached
                    raise RuntimeError("elapsed_time: an event has not completed")
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
    monkeypatch.setattr(samplers, "time", simulated.clock())
    return simulated


def _calls(stream: _SimulatedStream):
    """A side that takes the host 1 ms to queue 2 ms of GPU work, and one that queues 2 ms and waits for them (as
    ``torch.linalg.cholesky`` waits to check its result)."""

    host_paced = _queueing(stream, 1.0, 2.0)

    def waits_for_the_device():
        stream.queue(2.0)
        stream.synchronize()

    return {"candidate": host_paced, "reference": waits_for_the_device}


def _queueing(stream: _SimulatedStream, host_ms: float, gpu_ms: float, launches: int = 1):
    """A call that takes the host ``host_ms`` to queue ``gpu_ms`` of GPU work, in ``launches`` equal launches, each
    queued once its share of the host time is spent (a new closure each time)."""

    def call():
        for _ in range(launches):
            stream.host_ms += host_ms / launches
            stream.queue(gpu_ms / launches)

    return call


def _waiting_partway(stream: _SimulatedStream, host_ms: float, before_ms: float, after_ms: float):
    """A call that waits partway, as torch_compile's batched_solve_small_fp32 does: it queues ``before_ms`` of GPU work
    (the factoring) in ``host_ms``, waits for it (the factors checked on the host), then queues ``after_ms`` more (the
    solves) in ``host_ms`` and returns while they run."""

    def call():
        _queueing(stream, host_ms, before_ms)()
        stream.synchronize()
        _queueing(stream, host_ms, after_ms)()

    return call


def _waiting_probe_ms(call_ms: float, after_ms: float) -> float:
    """The host's time in the probe of a side that waits (``CudaSampler._probe_waits``): its one call on the empty
    queue (``call_ms``, the host waiting for its work), then two late tries, each a sleep and the ``after_ms`` of the
    call's GPU work queued behind it; the first sleep twice the one call's time and 0.5 ms, the second twice the first
    try's and 0.5 ms."""
    first_ms = 2 * call_ms + samplers.WAIT_PROBE_MARGIN_MS + after_ms
    second_ms = 2 * first_ms + samplers.WAIT_PROBE_MARGIN_MS + after_ms
    return call_ms + first_ms + second_ms


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
    assert led[1] == [1, 3, 5, 7, 9]  # every candidate sample, each after a waiting call
    assert sampler.leads.lead_ms("candidate") == pytest.approx(1.0)
    # The waiting side's host time (2 ms) covers its GPU time: probed, it waits, and it is not led. The host-paced
    # side's (1 ms) is half its GPU time: probed too, it does not wait, and it leads by its host time.
    assert sampler.leads.waits == {"reference": True, "candidate": False} and sampler.leads.lead_ms("reference") == 0.0


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
    _interleaved(sampler, calls, 2)  # the history, then the probes (the reference waits) and leads at this clock
    assert sampler.leads.waits == {"reference": True, "candidate": False}
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


@pytest.mark.parametrize("call_ms, in_turn", [(3.0, True), (0.5, False)])
def test_the_wait_probes_time_is_on_record_before_the_turn_or_in_it(stream, monkeypatch, call_ms, in_turn):
    """Where a probe runs and how long it took (``Timing.wait_probes_s``). Both sides wait for the device. A round of
    both (6 ms, batched_solve_small_fp32's kind) is the warm-up's only one, so the sides are first due in the turn's
    first launch and probed there, with nothing measured (on the H100's whole suite: up to 0.25 s of a turn, 2.3-3.0 s of
    a pass, sixty-sixth session); a short round (1 ms) gets two more in a second launch, which probes them before the
    turn."""
    from runner.worker import timing as timing_module
    from runner.worker.clocks import ClockMonitor
    from runner.worker.protocol import TimingSettings

    def waits():
        stream.queue(call_ms)
        stream.synchronize()

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    probed_at, turned_at = [], []
    probe = sampler._probe_waits
    sampler._probe_waits = lambda fn, label: probed_at.append(stream.host_ms) or probe(fn, label)
    monkeypatch.setattr(timing_module, "time", stream.clock())
    settings = TimingSettings(min_samples=40, max_samples=40, batch=10, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(sampler, ClockMonitor(None))
    timing, _ = timing_module.measure_pair(
        waits, waits, torch.device("cuda"), settings, "s", 3, tools=tools, turn=lambda: turned_at.append(stream.host_ms)
    )
    assert len(probed_at) == 2 and (min(probed_at) >= turned_at[0]) is in_turn
    assert (max(probed_at) < turned_at[0]) is not in_turn
    assert timing.waits_for_device == {"reference": True, "candidate": True}
    # The host's time in the probes (the simulated clock), per side: one call on the empty queue (a call waits its own
    # GPU time), then two late tries.
    probes_s = 2 * _waiting_probe_ms(call_ms, call_ms) / 1000.0
    where, elsewhere = ("in_turn", "before_turn") if in_turn else ("before_turn", "in_turn")
    assert timing.wait_probes_s[where] == pytest.approx(probes_s, rel=0.05) and timing.wait_probes_s[elsewhere] == 0.0
    for side in ("reference", "candidate"):
        calls = timing.wait_probe_calls[side]
        assert calls["tries"] == 2 and calls["host_ms"] == pytest.approx(call_ms) == calls["gpu_ms"]


def test_the_batches_queued_ahead_of_a_probe_are_not_its_time(stream):
    """A side probed in a later launch, with 100 ms of batches still queued ahead (the loop runs one batch ahead): the
    probe waits for them first, and they are measurements, not the probe's time. Ten tasks' probes on the H100 took
    2.2 s with them counted, their own sleeps and calls 0.74 s (sixty-seventh session). Here the probe's own time is
    one call that waits for its work (2 ms to queue, 2 ms on the GPU), then two late tries, each a sleep and the
    call's 2 ms on the GPU behind it (it is queued while the sleep runs)."""

    def waits():
        stream.host_ms += 2.0
        stream.queue(2.0)
        stream.synchronize()

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    for _ in range(3):
        sampler.leads.add("candidate", host_ms=4.0, gpu_ms=4.0)
    stream.queue(100.0)  # the batches ahead
    began = stream.host_ms
    sampler._probe_due([waits], ["candidate"])
    assert sampler.leads.waits == {"candidate": True}
    assert stream.host_ms - began >= 100.0
    assert sampler.probe_s == pytest.approx(_waiting_probe_ms(4.0, 2.0) / 1000.0, rel=0.05)


@pytest.mark.parametrize("waits", [False, True])
def test_a_lone_slow_first_call_does_not_size_the_probe(stream, monkeypatch, waits):
    """A warm-up of one round (9 ms a call) leaves each side a history of one call, its first at this shape, here 50
    ms on the host (loading its kernels). That call alone would make a side that queues 9 ms in 0.6 ms look as if it
    waited, and size its probe's sleeps at 100 ms (0.22 s a side). The probe times one call of its own first: a side
    whose host is well ahead of its GPU work is settled by it, with no try (0.0096 s a side; on the H100,
    attention_sliding_window_mistral_bf16's reference: 0.5 ms of host for 10 ms, sixty-seventh session); one that waits
    (its host time covers its 9.6 ms) is tried with sleeps sized from that call."""
    from runner.worker import timing as timing_module
    from runner.worker.clocks import ClockMonitor
    from runner.worker.protocol import TimingSettings

    calls = {"reference": 0, "candidate": 0}

    def side(label):
        def call():
            stream.host_ms += 50.0 if calls[label] == 0 else 0.6
            calls[label] += 1
            stream.queue(9.0)
            if waits:
                stream.synchronize()

        return call

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    monkeypatch.setattr(timing_module, "time", stream.clock())
    settings = TimingSettings(min_samples=20, max_samples=20, batch=10, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(sampler, ClockMonitor(None))
    timing, _ = timing_module.measure_pair(
        side("reference"), side("candidate"), torch.device("cuda"), settings, "s", 3, tools=tools, turn=lambda: None
    )
    assert timing.waits_for_device == {"reference": waits, "candidate": waits}
    host_ms = 9.6 if waits else 0.6  # a call that waits returns once its work is done: 0.6 ms to queue it, then 9
    for label in ("reference", "candidate"):
        probed = timing.wait_probe_calls[label]
        assert probed["host_ms"] == pytest.approx(host_ms) and probed["gpu_ms"] == pytest.approx(9.6)
        assert probed["tries"] == (2 if waits else 0)
    # Per side: the one call (its GPU time, the host waiting for it), then, where it waits, two late tries, each a
    # sleep and the call's 9 ms behind it.
    per_side_ms = _waiting_probe_ms(9.6, 9.0) if waits else 9.6
    assert timing.wait_probes_s["in_turn"] == pytest.approx(2 * per_side_ms / 1000.0, rel=0.05)


def test_a_history_held_back_by_a_full_launch_queue_is_settled_by_one_call_and_leads_by_its_pace(stream):
    """topk_logits_llama3's kind on the H100 (sixty-eighth session): the host queues a call in 0.2 ms, the GPU runs it
    in 3 ms. With the launch queue full (here twelve pieces of work: four samples of three), a call returns only as the
    GPU frees room, so past a batch's first samples both sides' host history holds the GPU's pace and they look due for
    a probe, and would be led by their whole GPU time. The probe's one call on the empty queue returns in 0.2 ms:
    settled with no try, and the leads go by three times that call (0.6 ms), not 3 ms. Every sample still takes its
    3 ms."""
    call = _queueing(stream, 0.2, 3.0)
    stream.launch_slots = 12
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    calls = {"reference": call, "candidate": call}
    _interleaved(sampler, calls, 1)
    assert all(sampler.leads.host_ms(side) >= 2.4 and sampler.leads.to_probe(side) for side in calls)
    paced, waiting, led = _interleaved(sampler, calls, 2)
    assert sampler.leads.waits == {"reference": False, "candidate": False}
    for side in calls:
        probed = sampler.probe_calls[side]
        assert probed["tries"] == 0 and probed["host_ms"] == pytest.approx(0.2) and probed["history_host_ms"] >= 2.4
        assert sampler.leads.paces[side] == pytest.approx(0.2)
        assert sampler.leads.lead_ms(side) == pytest.approx(0.6)
    assert sampler.probe_s == pytest.approx(2 * 3.2 / 1000.0, rel=0.01)  # two calls, each waited for
    # The last batch started on an empty queue (the one before was waited for): its first sample led by 0.6 ms.
    handle = sampler.launch([call] * 4, ["reference", "candidate"] * 2)
    sampler.close(handle)
    times, _ = sampler.times(handle)
    positions, slept_ms = sampler.led(handle)
    assert positions == [0] and slept_ms == pytest.approx(0.6, rel=1e-3)
    assert times == pytest.approx([3.0] * 4) and paced + waiting == pytest.approx([3.0] * 20)


def test_a_launch_bound_side_does_not_wait_and_stays_led(stream):
    """A side whose host takes 1.8 ms to queue ten 0.1 ms kernels (a block of small launches) holds the host about as
    long as its GPU work on an empty queue, as a waiting one does, so it is probed; behind the probe's sleep it returns
    before the sleep ends, so it does not wait and is still led: behind its lead its samples take their GPU time, 1 ms,
    not the host's 1.8."""

    launch_bound = _queueing(stream, 1.8, 1.0, launches=10)
    calls = {"reference": launch_bound, "candidate": launch_bound}
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    unled, _, _ = _interleaved(sampler, calls, 1)
    assert unled[1:] == pytest.approx([1.8] * 4)
    assert sampler.leads.to_probe("candidate")
    later, _, led = _interleaved(sampler, calls, 3)
    assert sampler.leads.waits == {"reference": False, "candidate": False}
    assert led[-1] and later[-4:] == pytest.approx([1.0] * 4, abs=0.05)


def test_the_probe_takes_its_tries_again_where_its_sleeps_ran_short(stream):
    """A side that queues ten 0.2 ms kernels in 1.8 ms of host time (launch-bound: the probe's own first call does
    not settle it) and does not wait. Its probe's sleeps asked at a rate read at 345 MHz run 5.7 times shorter at
    1,980: the host outlasts them, and it would look as if it waited; the events give the rate they ran at, the tries
    are taken again at it, and the side is found not to wait."""

    quick = _queueing(stream, 1.8, 2.0, launches=10)
    stream.cycles_per_ms = 0.345e6
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    stream.cycles_per_ms = 1.98e6
    run_batch(sampler, [quick] * 4, labels=["candidate"] * 4)
    assert sampler.leads.to_probe("candidate")
    assert sampler._probe_waits(quick, "candidate") is False
    assert sampler._cycles_per_ms == pytest.approx(1.98e6)


@pytest.mark.parametrize("waiting_tries, tries, waits", [((0, 1, 2), 2, True), ((), 1, False), ((0,), 2, False)])
def test_the_probe_ends_at_its_first_early_return_or_its_second_late_one(stream, waiting_tries, tries, waits):
    """A try that returns before its sleep is over settles the side as not waiting, at once: a call that waits cannot
    (over the suite's second half on the H100, 159 tries of a cold pass went to sides that did not wait, each the
    second of two that agreed; seventy-second session). Two late tries in a row find it waiting. The side queues ten
    0.1 ms kernels in 1.8 ms (launch-bound: its probe's own first call does not settle it) and waits for the device in
    the tries listed (from 0): in all of them, as batched_solve's does; in none, a side that queues its work and
    returns; in the first alone, one whose host was held up once (late), then returned early."""
    count = [-1]  # the probe's own first call is -1
    launch_bound = _queueing(stream, 1.8, 1.0, launches=10)

    def call():
        launch_bound()
        if count[0] in waiting_tries:
            stream.synchronize()
        count[0] += 1

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    for _ in range(3):
        sampler.leads.add("candidate", host_ms=1.8, gpu_ms=1.9)
    assert sampler.leads.to_probe("candidate")
    assert sampler._probe_waits(call, "candidate") is waits
    assert count[0] == tries and sampler.probe_calls["candidate"]["tries"] == tries


def test_a_waiting_call_whose_host_is_held_up_after_its_sleep_is_queued_is_still_found_waiting(stream, monkeypatch):
    """Each try's host time counts from before its sleep is queued: a call that waits returns only after the sleep,
    so its try is late however long the host was held up in between (a cold pass's compiles beside). Timed from after
    the sleep's launch, a hold-up of 80% of the sleep there left the waiting call under three quarters of its sleep:
    early, and so settled as not waiting. Here the host is held up so after every sleep is queued."""
    waits = _queueing(stream, 0.1, 2.0)
    sleep = stream.sleep

    def held_up_sleep(cycles: int) -> None:
        sleep(cycles)
        stream.host_ms += 0.8 * cycles / stream.cycles_per_ms

    def call():
        waits()
        stream.synchronize()

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    monkeypatch.setattr(torch.cuda, "_sleep", held_up_sleep)
    for _ in range(3):
        sampler.leads.add("candidate", host_ms=2.1, gpu_ms=2.1)
    assert sampler._probe_waits(call, "candidate") is True
    assert sampler.probe_calls["candidate"]["tries"] == 2


def test_a_host_held_up_for_a_while_does_not_make_a_side_look_waiting(stream):
    """embedding_lookup_llama3_bf16's candidate in the H100's cold torch_compile pass (seventy-second session): its
    probe's own call took its host 0.25 ms of the 0.96 on the GPU (from before the call) on the empty queue, but the
    compiles beside held its host for some 5.8 ms a call after it, past the tries' sleeps of 1.0 ms: two late tries,
    found waiting, and the side went unled. A try after a late one now sleeps twice that try's host time and 0.5 ms
    (12.1 ms): the held-up call returns before it, and the side is found not waiting, after two tries."""
    calls = [0]

    def held_up():
        stream.host_ms += 0.25 if calls[0] == 0 else 5.8
        calls[0] += 1
        stream.queue(0.71)

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    for _ in range(3):
        sampler.leads.add("candidate", host_ms=5.8, gpu_ms=0.96)
    assert sampler._probe_waits(held_up, "candidate") is False
    probed = sampler.probe_calls["candidate"]
    assert probed["host_ms"] == pytest.approx(0.25) and probed["gpu_ms"] == pytest.approx(0.96)
    assert probed["tries"] == 2 and calls[0] == 3


@pytest.mark.parametrize("waits", [True, False])
def test_a_call_under_its_gpu_time_on_the_host_is_still_tried_for_a_wait_partway(stream, waits):
    """torch_compile's batched_solve_small_fp32 (seventieth session, on the H100) factors on the GPU, waits to check the
    factors on the host, then queues the solves and returns while they run. Here 4 ms of factoring queued in 0.1 ms,
    waited for, then 1.5 ms of solves queued in 0.1 ms: the probe's own call on the empty queue takes the host 4.2 ms
    of the GPU's 5.7 (0.74 of it; 4.04 of 5.44 in the H100's cold pass). That share once settled the side as not
    waiting, with no try, and it was led by 3.5 ms in one pass and found waiting in the next (0.85 there): its speedup
    moved 3.09%. Now only a call whose host is under a quarter of its GPU time is settled by it: this side is tried,
    behind each sleep it returns only once the sleep and the factoring are done, and it is found waiting: it is led
    only by the 1.5 ms of solves its call left running (its GPU time less its host time), not by its host time. A side
    that queues 5 ms of work in 3 ms and returns is tried too, found not waiting, and leads by that call's pace."""
    call = _waiting_partway(stream, 0.1, 4.0, 1.5) if waits else _queueing(stream, 3.0, 5.0)
    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    for _ in range(3):
        sampler.leads.add("candidate", host_ms=6.3, gpu_ms=5.4)
    assert sampler.leads.to_probe("candidate")
    sampler._probe_due([call], ["candidate"])
    assert sampler.leads.waits == {"candidate": waits}
    probed = sampler.probe_calls["candidate"]
    host_ms, gpu_ms = (4.2, 5.7) if waits else (3.0, 8.0)  # its GPU time from before the call: 3 ms, then 5
    assert probed["host_ms"] == pytest.approx(host_ms) and probed["gpu_ms"] == pytest.approx(gpu_ms)
    assert queue_lead.WAIT_PROBE_CALL_SHARE * gpu_ms < host_ms < queue_lead.WAIT_PROBE_HOST_SHARE * gpu_ms
    assert probed["tries"] == (2 if waits else 1)  # two late tries find a wait; one early one settles it
    assert sampler.leads.paces["candidate"] == pytest.approx(host_ms)
    assert sampler.leads.lead_ms("candidate") == pytest.approx(1.5 if waits else 5.0)


def test_a_side_that_waits_partway_is_probed_before_its_first_led_sample(stream):
    """The H100's run of tests/test_gpu.py's partway wait (seventy-first session), here on the simulated stream: both
    sides queue 2 ms, wait for them, then queue 3 ms and return. The warm-up's one round called the reference first,
    on an empty queue (2.1 ms of host for 5.1 on the GPU, 0.41), the candidate behind it (5.05 for 5.05). The history's
    gate at three quarters let the reference be led by its 2.1 ms in the first measured batch, before any probe: 10
    samples. With the gate at a quarter both sides are probed in that batch's launch and found waiting; each is led
    only by the 3 ms its call leaves running, which a sample of either side leaves ahead of the next: only a batch's
    first sample after a synchronisation (an audited batch's) finds the queue empty and is led."""
    waits_partway = _waiting_partway(stream, 0.05, 2.0, 3.0)
    timing, raw, _ = _measured_on_the_stream(stream, waits_partway, waits_partway, 5)
    assert timing.waits_for_device == {"reference": True, "candidate": True}
    assert timing.wait_probe_calls["reference"]["history_host_ms"] == pytest.approx(2.1)  # its warm-up call's
    assert timing.lead_ms == {"reference": pytest.approx(3.0), "candidate": pytest.approx(3.0)}
    led_batches = [slept for positions, slept in zip(raw["batch_led"], raw["batch_lead_ms"]) if positions]
    assert all(positions in ([], [0]) for positions in raw["batch_led"]), raw["batch_led"]
    assert 0 < len(led_batches) < len(raw["batch_led"]) and led_batches == pytest.approx([3.0] * len(led_batches))
    assert timing.reference.median_ms == pytest.approx(5.05) and timing.candidate.median_ms == pytest.approx(5.05)


def test_a_side_that_waits_partway_is_led_by_the_work_its_call_leaves_running(stream):
    """torch_compile's batched_solve_small_fp32 against its eager reference (H100, seventy-fourth session): the
    candidate factors on the GPU, waits to check the factors on the host, then queues the solves and returns while
    they run; the reference waits at its end. Found waiting, the candidate was not led: behind a reference sample
    (an empty queue) its factoring's launches lay in its samples, 4.04 ms against 3.81 behind its own side
    (``runner.bench paced``, 6.1% over). Here it takes 0.5 ms of host before it queues 2 ms of factoring, and 0.5 ms
    after the wait before it queues 1.5 ms of solves: 4.5 ms behind the reference, 4.0 behind itself. Its probe's call
    left 1.5 ms running after it returned (4.5 ms on the GPU, 3.0 on the host): led by that behind each reference
    sample, it takes 4.0 ms there too. The reference, which leaves nothing running, is not led. Fails on f822daf:
    every candidate sample 4.5 ms, none led."""

    def waits_for_the_device():
        stream.queue(2.0)
        stream.synchronize()

    calls = {"reference": waits_for_the_device, "candidate": _waiting_partway(stream, 0.5, 2.0, 1.5)}
    unled, _, _ = _interleaved(CudaSampler(torch.device("cuda"), False, False, 2.0), calls, 2)
    assert unled == pytest.approx([4.5] * 10)

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    candidate, reference, led = _interleaved(sampler, calls, 3)
    assert sampler.leads.waits == {"reference": True, "candidate": True}
    assert candidate[:5] == pytest.approx([4.5] * 5) and led[0] == []  # no history yet: nothing probed, nothing led
    assert candidate[5:] == pytest.approx([4.0] * 10) and reference == pytest.approx([2.0] * 15)
    assert led[1:] == [[1, 3, 5, 7, 9]] * 2  # every candidate sample, each behind a reference sample
    assert sampler.leads.left_running == {"candidate": pytest.approx(1.5)}


def test_a_sample_behind_less_work_than_its_host_takes_to_queue_is_led_by_the_difference(stream):
    """sort_moe_expert_ids_stable_int32 in a cold torch_compile pass (fifty-ninth session): both sides 0.23 ms on the
    GPU, the candidate's host slowed by the compiles beside (here 0.4 ms to queue it, the reference 0.1 ms). Neither
    waits for the device and the queue never runs dry after a batch's first sample, but behind a reference sample it
    holds less than the candidate's host time: unled, the candidate takes 0.27 ms (0.4 at a batch's start); led by
    what the queue lacks, 0.23 ms. The reference's samples are led only where what is ahead is counted low (the
    oldest sample's least), never at positions 4 and 6 here, and take 0.23 ms either way."""

    quick = _queueing(stream, 0.1, 0.23)

    slow_to_queue = _queueing(stream, 0.4, 0.23)

    calls = {"reference": quick, "candidate": slow_to_queue}
    unled, quick_unled, _ = _interleaved(CudaSampler(torch.device("cuda"), False, False, 2.0), calls, 4)
    assert unled[1:5] == pytest.approx([0.27] * 4)
    assert [t for i, t in enumerate(quick_unled) if i % 5] == pytest.approx([0.23] * 16)  # 0.33 at a batch's start

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    slow, quick_led, led = _interleaved(sampler, calls, 4)
    assert led[0] == []  # no history yet
    # From the second batch on, the candidate's samples after the batch's first take its GPU time (within 0.02 ms: a
    # lead read from a median still moving), and candidate samples behind reference ones are led.
    later = [t for batch in range(1, 4) for t in slow[batch * 5 + 1 : batch * 5 + 5]]
    assert later == pytest.approx([0.23] * 12, abs=0.021)
    # The first, behind the batch's first reference sample (0.23 ms queued), needs 0.4 ms ahead, but a lead is at most
    # its side's GPU time (QueueLead: a side's sleeps never outlast what it measures), so it keeps the rest of its
    # host's pace: led by the 0.04 ms the queue lacked while the reference's median still moved, then not at all
    # (0.40 ms, as unled). Only a batch that starts on an empty queue has such a sample.
    assert [slow[batch * 5] for batch in range(1, 4)] == pytest.approx([0.36, 0.36, 0.40], abs=1e-3)
    assert [1 in positions for positions in led[1:]] == [True, True, False]
    assert quick_led[5:] == pytest.approx([0.23] * 15, abs=1e-5)
    assert all(0 in positions and not {4, 6} & set(positions) for positions in led[1:])
    assert any({3, 5, 7, 9} & set(positions) for positions in led[1:])


def test_the_timing_loop_queues_each_batch_behind_the_last_so_the_gpu_never_waits_between_them(stream, monkeypatch):
    """``timing.measure_pair`` on the simulated stream: a batch without an audit call is closed by its last end event
    once the next batch is queued behind it, so that next batch's first sample starts where the last one's ended
    (no gap, no lead: the queue holds the last batch's work); a batch with an audit call is closed, the device waited
    for, before the next is queued, which then starts on an empty queue and is led. Both sides take the host 0.1 ms
    to queue 0.5 ms of GPU work. Each batch's window starts where the one it was queued behind ended, so windows
    do not overlap; each audit records the chain of batches queued ahead of its batch since the device was idle. The
    host's 1 ms to draw a batch's order is spent while the batch before it runs, an audited one too: the gap after an
    audited batch is its audit call and the next first sample's lead, not that millisecond."""
    from runner.worker import timing as timing_module
    from runner.worker.clocks import ClockMonitor
    from runner.worker.protocol import TimingSettings

    call = _queueing(stream, 0.1, 0.5)

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    read = []  # per batch read, when its first sample started and its last one ended
    times = sampler.times

    def recording_times(handle):
        pairs = handle["pairs"]
        read.append((pairs[0][0].at, pairs[handle["samples"] - 1][1].at))
        return times(handle)

    sampler.times = recording_times  # the events are reused every third batch: read as the loop reads them
    batch_order = timing_module.batch_order

    def slow_batch_order(rng, batch):
        stream.host_ms += 1.0
        return batch_order(rng, batch)

    monkeypatch.setattr(timing_module, "batch_order", slow_batch_order)
    monkeypatch.setattr(timing_module, "time", stream.clock())  # the windows on the samples' clock
    settings = TimingSettings(min_samples=400, max_samples=400, batch=10, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(sampler, ClockMonitor(None))
    timing, raw = timing_module.measure_pair(call, call, torch.device("cuda"), settings, "small", 5, tools=tools)
    assert len(raw["batch_window"]) == 40 and timing.reference.median_ms == pytest.approx(0.5)
    assert timing.audit_recheck is None  # no batches after the measured ones
    batches, audited = read[-40:], raw["batch_audited"]
    behind, after_audit = 0, 0
    for k in range(1, 40):
        (_, ended), (started, _) = batches[k - 1], batches[k]
        gap, positions = raw["batch_gap_before_ms"][k], raw["batch_led"][k]
        assert gap == pytest.approx(started - ended)  # the sampler's own reading of the gap
        if audited[k - 1]:
            after_audit += 1
            assert 0.5 <= started - ended <= 0.65 and 0 in positions  # the audit call, then the lead (0.1 ms)
        else:
            behind += 1
            assert started == pytest.approx(ended) and 0 not in positions
    assert behind >= 20 and after_audit >= 2 * sync_audits.MIN_AUDITS - 1
    windows = raw["batch_window"]
    assert all(earlier[1] <= later[0] <= later[1] for earlier, later in zip(windows, windows[1:]))
    # The chains: 0 for an audited batch after an audited one; one more than the batch before for one behind it.
    chain, expected = 0, {"reference": [], "candidate": []}
    for k, side in enumerate(audited):
        chain = chain + 1 if k and not audited[k - 1] else 0
        if side:
            expected[side].append(chain)
    assert raw["sync_audit_chain"] == expected and max(max(c) for c in expected.values()) >= 2


def _measured_on_the_stream(
    stream, reference, candidate, seed: int, slow_audit=None, turn=None, quiet=None, grow=None, settings=None
):
    """``timing.measure_pair`` on the simulated stream, 200 pairs in batches of 10 (20 batches; the first six audited,
    a quarter of the rest) unless ``settings`` says otherwise; ``slow_audit(handle, audit)``, where given, is called
    just before each audited batch's audit call is queued; ``turn``, ``quiet`` and ``grow`` go to ``measure_pair``
    (``reference`` and ``candidate``: a closure each, or a list, one per placement). Returns the timing, the raw
    samples and each batch closed (the warm-up's rounds, the measured batches, the fresh audits' batches): its first
    sample's start and its last one's end on the GPU (ms), read as it is closed (its events are reused every third
    batch)."""
    from runner.worker import timing as timing_module
    from runner.worker.clocks import ClockMonitor
    from runner.worker.protocol import TimingSettings

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0, lead=True)
    spans = []
    close = sampler.close

    def watched_close(handle, audit=None):
        if audit is not None and slow_audit is not None:
            slow_audit(handle, audit)
        close(handle, audit)
        pairs = handle["pairs"]
        spans.append((pairs[0][0].at, pairs[handle["samples"] - 1][1].at))

    sampler.close = watched_close
    if settings is None:
        settings = TimingSettings(min_samples=200, max_samples=200, batch=10, warmup_ms=0.0, target_noise=0.0)
    tools = timing_module.Instruments(sampler, ClockMonitor(None))
    timing, raw = timing_module.measure_pair(
        reference, candidate, torch.device("cuda"), settings, "s", seed, tools=tools, turn=turn, quiet=quiet, grow=grow
    )
    return timing, raw, spans


def test_a_batch_queued_behind_one_that_ends_while_it_is_queued_starts_its_window_where_that_one_ended(
    stream, monkeypatch
):
    """Calls that take the host 0.3 ms to queue 0.1 ms of GPU work: the leads keep the queue one call's host time
    long, so a batch queued behind the last one sees that one end a sample or two into its own queueing. Its window
    starts there (seen ended within ``AHEAD_POLL_NS`` and one sample), not where the host closed that one after
    queueing this one whole (6 ms of host time later, where the sixty-first session's loop started it, its first
    samples outside it); the one ahead's window ends there too, so windows meet and do not overlap. With the loop's
    clock the stream's host clock, every batch's samples on the GPU lie in its window, to a sample's host time (the
    first of a batch may start before its predecessor is seen ended)."""
    from runner.worker import timing as timing_module

    call = _queueing(stream, 0.3, 0.1)

    monkeypatch.setattr(timing_module, "time", stream.clock())
    _, raw, spans = _measured_on_the_stream(stream, call, lambda: call(), seed=2)
    windows = [[1000.0 * edge for edge in window] for window in raw["batch_window"]]
    spans = spans[-20:]  # the warm-up's rounds came before them
    assert len(windows) == len(spans) == 20
    assert all(earlier[1] <= later[0] for earlier, later in zip(windows, windows[1:]))
    for k, ((launched, closed), (first, last)) in enumerate(zip(windows, spans)):
        assert launched - 0.35 <= first and last <= closed + 1e-9  # its samples in it, to a sample's host time
        if k:  # it starts where the one ahead was seen ended, within a sample's host time of its last end event
            assert 0.0 <= launched - spans[k - 1][1] <= 0.35


def test_the_recheck_takes_its_audits_after_a_synchronisation_and_behind_a_chain_of_batches(stream):
    """A candidate that leaves 3 ms of work on another stream after each 0.5 ms call (test double's host model: no GPU
    here), against a 5 ms reference, whose own calls outlast that work: its audits are flagged, and the fresh ones are
    taken in both shapes the measured ones came in: ``RECHECK_AUDITS`` per side after a synchronisation and as many
    queued behind a chain of unaudited batches as long as the measured audits' median chain, each batch of the chain
    queued behind the last (the audited one starts on the GPU where the chain ended). Both shapes find the work: the
    evidence stands. No sample of the recheck is kept."""
    from runner.worker.integrity import unjoined_work

    reference = _queueing(stream, 0.1, 5.0)

    def candidate():
        stream.host_ms += 0.1
        ends = stream.queue(0.5)
        stream.side_free_at = max(stream.side_free_at, ends) + 3.0  # takes the call's output; not joined

    timing, raw, spans = _measured_on_the_stream(stream, reference, candidate, seed=5)
    recheck = timing.audit_recheck
    assert recheck is not None and recheck["first_gap_ms"]["candidate"] > 2.5
    # Seed 5's one measured audit behind a chain came behind 8 batches: the recheck's chain is that, at most 4.
    measured_chains = [c for side in ("reference", "candidate") for c in raw["sync_audit_chain"][side] if c > 0]
    assert measured_chains == [8] and recheck["chain"] == sync_audits.RECHECK_CHAIN_MAX == 4
    for side in ("reference", "candidate"):
        chains = raw["sync_audit_recheck_chain"][side]
        assert sorted(chains) == [0] * sync_audits.RECHECK_AUDITS + [recheck["chain"]] * sync_audits.RECHECK_AUDITS
    fresh = raw["sync_audit_recheck"]["candidate"]
    assert min(fresh) > 3.0 and timing.sync_gap_ms["candidate"] > 2.5
    assert unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, recheck) is not None
    # The recheck's batches behind a chain, the last closed: in each audit's chain and its audited batch, each starts
    # on the GPU where the one before ended; between two audits, the synchronisation after the first leaves a gap.
    behind = sorted(spans[-2 * sync_audits.RECHECK_AUDITS * (recheck["chain"] + 1) :])
    gaps = [started - ended for (_, ended), (started, _) in zip(behind, behind[1:])]
    assert all(gap >= -1e-9 for gap in gaps)
    assert sum(gap > 1e-9 for gap in gaps) == 2 * sync_audits.RECHECK_AUDITS - 1
    assert len(raw["reference"]) == len(raw["candidate"]) == 200  # the recheck's samples are not kept


def test_one_slowed_audit_in_a_shape_of_few_is_topped_up_and_cleared_without_a_recheck(stream):
    """A side's audits behind a chain are often one or two (the first six batches are audited after a synchronisation
    each, a quarter of the rest after that), so one audit slowed by another process's work is that shape's median:
    on the H200 4 of 568 candidate audits were slowed that far by themselves. Here the candidate's one audit behind a
    chain finds 5 ms of someone else's work on the device (test double's host model: no GPU here): fresh audits bring
    each thin shape up to ``MIN_AUDITS``, behind a chain as long as the recheck's, and the median of its three clears
    the candidate; no recheck is taken, the samples stay the measurement's."""
    from runner.worker.integrity import unjoined_work

    reference = _queueing(stream, 0.1, 0.5)

    candidate = _queueing(stream, 0.1, 0.5)

    slowed = []

    def slow_audit(handle, audit):
        if audit is candidate and handle["behind"] and not slowed:
            slowed.append(stream.host_ms)
            stream.side_free_at = max(stream.side_free_at, stream.free_at) + 5.0  # lands on the audit call

    timing, raw, _ = _measured_on_the_stream(stream, reference, candidate, seed=2, slow_audit=slow_audit)
    measured = raw["sync_audit_chain"]
    assert measured == {"reference": [0, 0, 0, 3], "candidate": [0, 0, 0, 5]}  # seed 2: one of each side behind a chain
    top_up = timing.audit_top_up
    assert top_up is not None and top_up["first_gap_ms"]["candidate"] > 4.0 and "another stream" in top_up["why"]
    thin = sync_audits.MIN_AUDITS - 1  # each side's shape behind a chain held one audit
    assert top_up["chain"] == 4 and top_up["audits"] == {"reference": thin, "candidate": thin}
    assert raw["sync_audit_top_up_chain"] == {"reference": [4, 4], "candidate": [4, 4]}
    assert max(raw["sync_audit_top_up"]["candidate"]) < 1.0  # the fresh ones undisturbed
    assert timing.audit_recheck is None and raw["sync_audit_recheck"] == {"reference": [], "candidate": []}
    assert timing.sync_gap_ms["candidate"] < 0.5 and unjoined_work(timing.sync_gap_ms, 0.5) is None
    assert len(raw["reference"]) == len(raw["candidate"]) == 200 and len(slowed) == 1


def test_a_candidate_honest_for_a_batch_after_each_synchronisation_is_topped_up_then_rechecked(stream, monkeypatch):
    """A reviewer's model on the simulated stream: a candidate that leaves 3 ms on another stream in every call after
    its eleventh since the last device-wide synchronisation (a batch of 10 and its audit call run clean after one). Its
    audits behind a chain show the work; the top-up of that thin shape shows it again, and the recheck in both shapes
    confirms it: the evidence stands, with the top-up and the recheck on record."""
    syncs = {"count": 0, "seen": -1, "calls": 0}
    synchronize = stream.synchronize

    def counted_synchronize(device=None):
        syncs["count"] += 1
        synchronize(device)

    stream.synchronize = counted_synchronize
    monkeypatch.setattr(torch.cuda, "synchronize", counted_synchronize)

    reference = _queueing(stream, 0.1, 0.5)

    def candidate():
        stream.host_ms += 0.1
        ends = stream.queue(0.5)
        if syncs["seen"] != syncs["count"]:
            syncs.update(seen=syncs["count"], calls=0)
        syncs["calls"] += 1
        if syncs["calls"] > 11:
            stream.side_free_at = max(stream.side_free_at, ends) + 3.0

    from runner.worker.integrity import unjoined_work

    timing, raw, _ = _measured_on_the_stream(stream, reference, candidate, seed=2)
    assert raw["sync_audit_chain"]["candidate"] == [0, 0, 0, 5]
    clean = [a for a, c in zip(raw["sync_audit"]["candidate"], raw["sync_audit_chain"]["candidate"]) if c == 0]
    assert max(clean) < 1.0  # honest where the device was synchronised a batch before
    assert timing.audit_top_up is not None and min(raw["sync_audit_top_up"]["candidate"]) > 2.5
    recheck = timing.audit_recheck
    assert recheck is not None and recheck["first_gap_ms"]["candidate"] > 2.5
    evidence = unjoined_work(timing.sync_gap_ms, timing.candidate.median_ms, recheck)
    assert evidence and "the audits were taken twice" in evidence


def test_a_batch_closed_with_the_next_in_flight_drops_its_own_samples_from_the_work_ahead():
    """``QueuedWork.done_through``: the samples up to a number are dropped (their batch was waited for), those queued
    after it (the next batch's, still running) stay ahead of the next sample, whole."""

    class NotDone:  # an end event the GPU has not passed (test double: no GPU here)
        def query(self) -> bool:
            return False

    queued = queue_lead.QueuedWork()
    numbers = [queued.add(NotDone(), queued_at_ns=0, expected_ms=1.0) for _ in range(5)]
    later = [queued.add(NotDone(), queued_at_ns=10**9, expected_ms=2.0) for _ in range(3)]
    assert numbers == [0, 1, 2, 3, 4] and later == [5, 6, 7]
    queued.done_through(numbers[-1])
    assert queued.ahead_ms(now_ns=10**9) == pytest.approx(6.0)  # the oldest left queued just now: its whole 2 ms
    queued.done_through(later[-1])
    assert queued.ahead_ms(now_ns=10**9) == 0.0


def test_an_audited_batch_with_another_queued_behind_it_is_refused(stream):
    """An audit call must follow its batch's samples: closing an audited batch once another batch has been queued
    behind it (the timing loop closes it first) raises instead of timing the audit behind the later batch's work."""

    call = _queueing(stream, 0.1, 0.5)

    sampler = CudaSampler(torch.device("cuda"), False, False, 2.0)
    first = sampler.launch([call] * 4)
    second = sampler.launch([call] * 4)
    with pytest.raises(RuntimeError, match="queued behind this one before its audit call"):
        sampler.close(first, call)
    sampler.close(second, call)  # the last queued: its audit follows its samples
    assert sampler.times(second)[1] == pytest.approx(0.5)


@pytest.mark.parametrize("call_ms, in_turn", [(3.0, True), (0.5, False)])
def test_the_timing_loop_holds_the_context_lock_from_the_batch_where_a_side_is_known_to_wait(
    stream, monkeypatch, tmp_path, call_ms, in_turn
):
    """``timing.measure_pair``'s side of a quiet turn (runner/worker/quiet_turn.py), on the simulated stream with the
    device's real context lock: the reference waits for the device inside its calls (``call_ms`` queued, then waited
    for, as ``torch.linalg.cholesky``), the candidate takes the host 0.1 ms to queue as much. The loop takes the lock
    before the first batch it launches once the probe has found the reference waiting, and holds it for every batch
    after, whether the probe ran before the turn (a short round: the warm-up's second launch) or in the turn's first
    launch (a 6 ms round, the warm-up's only one); the caller lets it go. Two sides that do not wait, one of them
    probed, never ask for it. (tests/test_gpu.py's ``..._holds_the_context_lock`` runs the same on a GPU's own probe.)"""
    from runner.worker.device_token import create_token_files
    from runner.worker.quiet_turn import QuietTurn
    from tests.conftest import context_lock_free

    token = create_token_files(tmp_path / "gpu.work")
    # For each batch the turn launches: whether a side was known to wait as it was launched, and whether another
    # process could have taken the context lock then.
    launches, in_the_turn = [], []
    launch = CudaSampler.launch

    def watched_launch(sampler, fns, labels=None):
        if in_the_turn:
            launches.append((any(sampler.leads.waits.values()), context_lock_free(token)))
        return launch(sampler, fns, labels)

    monkeypatch.setattr(CudaSampler, "launch", watched_launch)

    def measured(reference, candidate, quiet):
        launches.clear()
        in_the_turn.clear()
        timing, _, _ = _measured_on_the_stream(
            stream, reference, candidate, 3, turn=lambda: in_the_turn.append(True), quiet=quiet
        )
        return timing

    def waits():
        stream.queue(call_ms)
        stream.synchronize()

    quiet = QuietTurn(token)
    timing = measured(waits, _queueing(stream, 0.1, call_ms), quiet)
    try:
        assert timing.waits_for_device.get("reference") is True and not timing.waits_for_device.get("candidate")
        assert len(launches) >= 6
        # The first batch launched with the wait known is the first one the lock is held for; every batch after, too.
        first_known = [known for known, _ in launches].index(True)
        assert first_known == (1 if in_turn else 0), launches
        assert [free for _, free in launches] == [True] * first_known + [False] * (len(launches) - first_known)
        assert quiet.asked and "not taken" not in quiet.record and quiet.record["waited_s"] < 0.5, quiet.record
        assert timing.window[0] <= quiet.record["window"][0] <= timing.window[1]
        assert not context_lock_free(token)  # still held as measure_pair returns: its caller lets it go
    finally:
        quiet.release()
    assert context_lock_free(token) and quiet.record["window"][1] >= timing.window[1]

    # The reference's host half its GPU time: probed, and found not waiting.
    neither = QuietTurn(token)
    timing = measured(_queueing(stream, call_ms / 2, call_ms), _queueing(stream, 0.1, call_ms), neither)
    assert timing.waits_for_device.get("reference") is False and not neither.asked, timing.waits_for_device
    assert all(free for _, free in launches) and len(launches) >= 6
    neither.release()


def test_placements_hidden_by_a_disturbed_start_are_judged_again_and_made_once_it_has_passed(stream, monkeypatch):
    """The run's-first-turn slowdown of the H100 (BENCHMARKS.md, seventy-eighth session) on the simulated stream (test
    double's host model: no GPU here), with placements (``placement_judge.judging_due``): for the first 0.5 s
    each call runs 40% slow at random, half the time, on either side. Odd placements' candidate runs 5% longer,
    which that noise hides from the judgement at three batches each; once the stretch has passed the placements are
    judged again at a later round, and grow to the most."""
    import random

    from runner.worker import timing as timing_module
    from runner.worker.placement_judge import placements_wanted
    from runner.worker.protocol import TimingSettings

    monkeypatch.setattr(timing_module, "time", stream.clock())
    disturbance = random.Random(7)

    def call(gpu_ms: float):
        def queue() -> None:
            stream.host_ms += 0.05
            slowed = stream.host_ms < 500.0 and disturbance.random() < 0.5
            stream.queue(gpu_ms * (1.4 if slowed else 1.0))

        return queue

    def pair(k: int):
        return call(2.0), call(1.05 if k % 2 else 1.0)

    made: list[int] = []

    def grow(wanted: int):
        made.append(wanted)
        return [pair(k) for k in range(4 * len(made), 4 * len(made) + wanted)]

    first = [pair(k) for k in range(4)]
    settings = TimingSettings(
        min_samples=20, max_samples=4000, batch=10, warmup_ms=0.0, target_noise=0.002, time_cap_s=30, max_placements=8
    )
    timing, raw, _ = _measured_on_the_stream(
        stream, [r for r, _ in first], [c for _, c in first], 3, grow=grow, settings=settings
    )
    placed, windows = raw["batch_placement"], raw["batch_window"]
    # The judgement at three batches each saw the disturbed batches only, and called for none.
    assert windows[11][1] < 0.5 and placements_wanted(raw, placed[:12], 10, 4, settings) == 0
    assert made == [4] and timing.placements == 8 and timing.placements_added == 4
    grown_at = placed.index(4)  # the first batch of the placements made
    assert grown_at > 12 and windows[grown_at][0] > 0.5  # judged again after the stretch
    assert min(placed.count(k) for k in range(8)) >= 3  # the new ones sampled until they could be judged
