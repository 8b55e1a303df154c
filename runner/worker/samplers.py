"""How one batch of timing samples is taken: on the host clock, or with CUDA events on a GPU.

A sampler queues a batch of calls (``launch``), closes it (``close``: the audit call, if any, and
the synchronisation after which the batch is done) and reads its times (``times``), the audited call's own
time where it counts as a sample (``audit_sample``) and its span, from the first sample's start to the last
one's end (``span``), so the timing loop (``timing.py``) can queue the next batch behind the last before it closes
and reads that one.
The CUDA sampler flushes the L2 outside the timed region before every sample in cold mode, and where it leads
(``lead``), a sample that finds less work queued ahead of it than its side takes the host to queue starts behind a GPU
sleep that makes up the difference (``queue_lead.py``: ``QueueLead``, ``QueuedWork``). ``warm_up`` runs a closure
before its measurement. This module decides nothing about when to stop or what to keep.
"""

from __future__ import annotations

import math
import time

import torch

from runner.worker.queue_lead import WAIT_PROBE_HOST_SHARE, WAITING_LEAD_MIN_MS, QueuedWork, QueueLead, may_wait


def warm_up(fns, sampler, warmup_ms: float, labels=None) -> float:
    """One round of ``fns`` (both sides of a measurement) in turn, two more where it was shorter than
    ``LONG_ROUND_MS``, queued as one batch (the first calls may compile or load: on the host, as they are queued),
    then the rest of ``warmup_ms``, the sides together, in batches of rounds sized from the first: a
    wait per batch, not one per call or round. A warm-up runs beside the last measurement's checks
    after timing, whose every wait for the device then waits for a time slice too, and the next measurement waits
    for both (it was three batches of one round: BENCHMARKS.md, twenty-ninth session). The sides share it: what a
    warm-up settles (clocks, the caching allocator, lazily loaded code) is the GPU's or each side's first calls,
    not a time per side (it was ``warmup_ms`` per side, BENCHMARKS.md, thirteenth session). ``labels``: each
    function's side (the sampler's leads learn their times). Returns the shortest of the first rounds, ms."""
    fns = list(fns)
    labels = list(labels) if labels is not None else None
    times = run_batch(sampler, fns, labels=labels)[0]
    rounds = 1
    if sum(times) < LONG_ROUND_MS:
        times += run_batch(sampler, fns * 2, labels=labels and labels * 2)[0]
        rounds = 3
    shortest = _shortest_round(times, len(fns))
    spent = sum(times)
    while spent < warmup_ms and rounds < MAX_WARMUP_ROUNDS:
        per_round = max(_shortest_round(times, len(fns)), 1e-3)
        size = max(1, min(math.ceil((warmup_ms - spent) / per_round), MAX_WARMUP_ROUNDS - rounds))
        times = run_batch(sampler, fns * size, labels=labels and labels * size)[0]
        spent += sum(times)
        rounds += size
    return shortest


def _shortest_round(times: list[float], width: int) -> float:
    """The shortest round among a batch's times, ``width`` calls a round."""
    return min(sum(times[k : k + width]) for k in range(0, len(times), width))


# The most rounds a warm-up runs, whatever ``warmup_ms`` asks for.
MAX_WARMUP_ROUNDS = 1000
# A first round of the warm-up this long (ms, both sides) is its only one, unless ``warmup_ms`` asks for more. The
# correctness trials have run these calls at this shape already; three rounds of long calls held each hand-over
# between two measurements for 64 ms (median; calls under 1 ms: 19.5 ms), as the next measurement's warm-up
# outlasted the last one's checks (BENCHMARKS.md, thirtieth session); with one, the hand-overs of a full suite took
# 4.7-5.0 s instead of 6.7 (thirty-first session). Shorter rounds get two more: the batch's
# size is read off the shortest (``stopping.batch_pairs``), and a round this long already fills the least batch
# (20 pairs) with 50 ms, ``h100_fullsuite``'s ``batch_min_ms``.
LONG_ROUND_MS = 2.5


def run_batch(sampler, fns, audit=None, labels=None) -> tuple[list[float], float | None]:
    """One batch on either sampler, start to end: launched (``labels``: each call's side), closed (with the audit
    call, if any), read."""
    handle = sampler.launch(fns, labels)
    sampler.close(handle, audit)
    return sampler.times(handle)


class HostSampler:
    """The host clock: each call runs as it is launched, so a batch is done when ``launch`` returns."""

    clock = "host_perf_counter"
    flushes = False
    flush_bytes = None
    # A batch is done when ``launch`` returns: none can be queued behind another.
    queues_ahead = False

    def launch(self, fns, labels=None) -> dict:
        times = []
        first = time.perf_counter_ns()
        for fn in fns:
            start = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - start) / 1e6)
        return {"times": times, "span": (time.perf_counter_ns() - first) / 1e6}

    def close(self, handle, audit=None) -> None:
        pass

    def times(self, handle: dict) -> tuple[list[float], None]:
        return handle["times"], None

    def audit_sample(self, handle: dict) -> None:
        """No audits on the host clock."""
        return None

    def led(self, handle: dict) -> tuple[list[int], float]:
        """No leads on the host clock: a call runs as it is launched."""
        return [], 0.0

    def gap_before(self, handle: dict) -> None:
        """No GPU between batches on the host clock."""
        return None

    def ahead_ended_at(self, handle: dict) -> None:
        """None: no batch runs ahead of another on the host clock."""
        return None

    def queued_behind(self, handle: dict) -> bool:
        """A batch runs as it is launched: never behind another."""
        return False

    def forget_last(self) -> None:
        """Nothing kept between batches on the host clock."""

    def span(self, handle: dict) -> float:
        """From the batch's first sample's start to its last one's end, in ms."""
        return handle["span"]


# While a batch is queued behind one still running, whether that one has ended is asked at most this often (ns): its
# end, seen within this and one sample's queueing, bounds both batches' windows (``CudaSampler.ahead_ended_at``), for
# one event query (about a microsecond) per 50 us of the host's queueing at most.
AHEAD_POLL_NS = 50_000
# A lead shorter than this (ms) is not queued: launching the sleep takes about as long as it would hide.
LEAD_MIN_MS = 0.01
# The share of its sleep after which a probe's try (``CudaSampler._probe_waits``) returned late, as a call that waits for
# the device does; one that returns sooner did not wait. A side is found waiting once this many tries in a row returned
# late: a host slowed for a moment (a cold pass's compiles beside) can make one call late, not make it early.
WAIT_PROBE_SHARE = 0.75
WAIT_PROBE_LATE_TRIES = 2
# The most tries a probe takes (late ones whose sleeps ran short are not counted towards a wait); a side still unsettled
# after them is taken as waiting (led only by what its call leaves running: a wait wrongly found costs leads, never a
# sample's time).
WAIT_PROBE_MAX_TRIES = 4
# The probe's sleep is twice the host time of its own call on the empty queue and this much more, ms.
WAIT_PROBE_MARGIN_MS = 0.5
# The GPU sleep the lead's rate is read from (``torch.cuda._sleep`` counts SM clock cycles): about 1 ms.
LEAD_CALIBRATION_CYCLES = 2_000_000


def _late(host_ms: float, slept_ms: float) -> bool:
    """Whether a probe's try (its call's host time from before its sleep was queued, and the time its sleep ran on the
    GPU, ms) returned only after ``WAIT_PROBE_SHARE`` of the sleep or more, as a call that waits for the device does."""
    return host_ms >= WAIT_PROBE_SHARE * slept_ms


class CudaSampler:
    """CUDA events around every sample, queued a batch at a time; three sets of events, so one batch can be queued
    while the one before still runs, and read while the next runs with the events of the one before it still standing
    (``gap_before``). A batch without an audit call is closed by waiting for its last end event, not for the whole
    device, so the batch queued behind it keeps the GPU busy meanwhile."""

    clock = "cuda_events"

    def __init__(
        self, device: torch.device, cold: bool, device_sync: bool, l2_multiple: float, lead: bool = False
    ) -> None:
        self.device = device
        self.flushes = cold
        self.device_sync = device_sync
        # Whether a launched batch runs on while the host goes on, so the next can be queued behind it: not where every
        # sample is closed by a device-wide synchronisation (the batch is done when ``launch`` returns).
        self.queues_ahead = not device_sync
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
        # ``l2_multiple`` L2 sizes (at least 64 MiB at two), written before every sample (TimingSettings).
        size = int(l2_multiple * max(l2_bytes, 32 << 20))
        self.flush_buffer = torch.empty(size, dtype=torch.int8, device=device) if cold else None
        self.flush_bytes = size if cold else None
        self._event_sets: list[list[tuple[torch.cuda.Event, torch.cuda.Event]]] = [[], [], []]
        # Per set, the event recorded right after an audited call (``close``).
        self._audit_called = [torch.cuda.Event(enable_timing=True) for _ in self._event_sets]
        self._next_set = 0
        # The leads (``QueueLead``): their policy; the sleep's SM cycles per ms, measured once here and then from every
        # batch's leads (the SM clock it was measured at may not be the one they run at); per event set, events around
        # each lead; and the samples queued and not known to be done, which tell how much work lies ahead of the next.
        self.leads = QueueLead() if lead else None
        self._cycles_per_ms = _sleep_cycles_per_ms(device) if lead else 0.0
        self._lead_event_sets: list[list[tuple[torch.cuda.Event, torch.cuda.Event]]] = [[], [], []]
        # The last end event of the batch launched last (``gap_before``, ``queued_behind``); None after ``forget_last``.
        self._last_end: torch.cuda.Event | None = None
        self._queued = QueuedWork()
        # The host's seconds in wait probes so far, all sides (``_probe_due``; ``Timing.wait_probes_s``), and per side
        # probed what the probe went on (``_probe_waits``; ``Timing.wait_probe_calls``).
        self.probe_s = 0.0
        self.probe_calls: dict[str, dict] = {}

    def _probe_due(self, fns, labels: list) -> None:
        """Probe each side among ``labels`` (``fns``' sides) that is due (``QueueLead.to_probe``: a history of both
        kinds, its host time a quarter of its GPU time or more) for a wait inside its calls, once a side, and count the
        host's time in it (``probe_s``). A side whose warm-up was one round (a round of 2.5 ms or more, ``warmup_ms``
        0) is due in the turn's first launch: probed there, in the turn. Probing it at the warm-up's end instead, beside
        the shared work, was tried on the H100 and did not pay: beside the last measurement's checks the GPU is
        time-sliced between them, the probe ran slower, and one hand-over took 0.58 s (BENCHMARKS.md, sixty-sixth
        session)."""
        if self.leads is None:
            return
        due = [label for label in dict.fromkeys(labels) if self.leads.to_probe(label)]  # each side once, in order
        if due:
            # The batches still queued ahead are measurements: waited for here, outside the probes' time. With them
            # counted, ten tasks' probes on the H100 took 2.2 s, of which their sleeps and calls 0.74 s (BENCHMARKS.md,
            # sixty-seventh session).
            torch.cuda.synchronize(self.device)
        for label in due:
            began = time.perf_counter()
            self.leads.waits[label] = self._probe_waits(fns[labels.index(label)], label)
            self.probe_s += time.perf_counter() - began

    def _probe_waits(self, fn, label: str) -> bool:
        """Whether ``fn`` (a call of ``label``'s side) waits for the device inside: queued behind a GPU sleep of twice
        its host time (one call's, below) and ``WAIT_PROBE_MARGIN_MS`` more, a call that waits returns only once the
        sleep is over, one that does not returns in its host time. Each try's host time is taken from before its sleep
        is queued, so a call that waits cannot return in less than the sleep, however its host is held up: a try that
        returns before ``WAIT_PROBE_SHARE`` of its sleep settles the side as not waiting, at once. The side waits where
        ``WAIT_PROBE_LATE_TRIES`` tries in a row returned later. Before, every side took two tries at least (a majority
        of three), and over the suite's second half on the H100 the probes took 1.68 s of a cold torch_compile pass,
        most of it in 159 tries of sides that did not wait (BENCHMARKS.md, seventy-second session). A try after a late
        one sleeps twice that try's whole host time and the margin: a host held up for a while returns before that
        sleep is over, a call that waits does not. In the same pass, embedding_lookup_llama3_bf16's candidate queued
        its call in 0.25 ms on the empty queue, but the compiles beside held its host for some 5.8 ms a call, past two
        sleeps of 1.0 ms: found waiting, and its leads lost. Each sleep is timed by events (a sleep counts SM cycles,
        and the clock may have moved since their rate was read): a late try whose sleep ran short of ``WAIT_PROBE_SHARE``
        of what was asked does not count towards a wait, and the next is asked at the rate it ran at;
        ``WAIT_PROBE_MAX_TRIES`` tries at most. The queue is emptied first and after, outside every sample.

        One call on the empty queue comes first (``_one_call``), because the side's host history may not be its host's
        pace: a call queued behind a full launch queue returns only as the GPU frees room, at the GPU's pace. On the
        H100, topk_logits_llama3 queues a call in 0.18 ms on an empty queue and in 3.09 ms (its GPU time, 3.15) once
        about forty samples are queued ahead, as the timing loop keeps them; four other tasks alike (BENCHMARKS.md,
        sixty-eighth session). So a side well ahead of its GPU work looked due, and most probes' tries were spent on
        such sides. Where that call's host time is under ``WAIT_PROBE_HOST_SHARE`` of its GPU time, the side's leads go
        by it (``QueueLead.paces``) instead of the history's; under ``WAIT_PROBE_CALL_SHARE`` the side cannot be
        waiting and no try is taken, while between the two a call that waits partway (and returns while the work queued
        after its wait runs) is still tried. That call's host time sizes the first try's sleep, and where the side is
        found waiting, the GPU time that call left running after it returned is the side's lead
        (``QueueLead.left_running``; none for a call that waits at its end). What the probe went on is in
        ``probe_calls``."""
        torch.cuda.synchronize(self.device)
        host_ms, gpu_ms = self._one_call(fn)
        record = self.probe_calls[label] = {
            "history_host_ms": round(self.leads.host_ms(label), 6),
            "host_ms": round(host_ms, 6),
            "gpu_ms": round(gpu_ms, 6),
            "tries": 0,
        }
        if host_ms < WAIT_PROBE_HOST_SHARE * gpu_ms:
            self.leads.paces[label] = host_ms  # its host's own pace; where the tries find a wait, not used
        if not may_wait(host_ms, gpu_ms):
            return False  # its host far ahead of its GPU work: it cannot be waiting for it
        want_ms = 2 * host_ms + WAIT_PROBE_MARGIN_MS
        late = 0
        for _ in range(WAIT_PROBE_MAX_TRIES):
            cycles = max(1, int(want_ms * self._cycles_per_ms))
            asleep, awake = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            began = time.perf_counter_ns()  # before the sleep is queued: a call that waits takes all of it
            asleep.record()
            torch.cuda._sleep(cycles)
            awake.record()
            fn()
            took_ms = (time.perf_counter_ns() - began) / 1e6
            awake.synchronize()  # this try's sleep over
            record["tries"] += 1
            slept_ms = asleep.elapsed_time(awake)
            self._cycles_per_ms = cycles / max(slept_ms, 1e-3)
            if not _late(took_ms, slept_ms):
                torch.cuda.synchronize(self.device)
                return False  # it returned while its sleep still ran: it does not wait
            # A late try counts where its sleep ran as long as asked, near enough; one that ran short (the SM clock
            # moved since the rate was read) is taken again at the rate it ran at.
            late = late + 1 if slept_ms >= WAIT_PROBE_SHARE * want_ms else 0
            if late == WAIT_PROBE_LATE_TRIES:
                break
            # The next sleep outlasts this try's whole host time: a host held up for a while (a cold pass's compiles
            # beside) returns before it, a call that waits after it again.
            want_ms = 2 * took_ms + WAIT_PROBE_MARGIN_MS
        torch.cuda.synchronize(self.device)
        left_ms = gpu_ms - host_ms  # the GPU work its call left running after it returned
        if left_ms >= WAITING_LEAD_MIN_MS:  # it waits partway: led by that
            self.leads.left_running[label] = left_ms
        return True

    def _one_call(self, fn) -> tuple[float, float]:
        """One call of ``fn`` on an empty queue, its host time and its GPU time (from before the call to after it
        returned, on events), ms; the queue emptied after it."""
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        before.record()
        began = time.perf_counter_ns()
        fn()
        host_ms = (time.perf_counter_ns() - began) / 1e6
        after.record()
        torch.cuda.synchronize(self.device)
        return host_ms, before.elapsed_time(after)

    def _flush(self) -> None:
        """Evict the L2 outside the timed region (cold mode)."""
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def _pairs(self, count: int):
        events = self._event_sets[self._next_set]
        self._next_set = (self._next_set + 1) % len(self._event_sets)
        while len(events) < count:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        return events[:count]

    def launch(self, fns, labels=None) -> dict:
        """Queue one sample per function, behind any batch still in flight; returns at once (unless every sample is
        closed by a device-wide synchronisation, ``sync="device"``), the GPU still working on them. ``labels``: each
        function's side, for the leads: where this sampler leads, a sample of a side with a lead that finds less work
        than that queued ahead of it (``QueuedWork``) starts behind a GPU sleep that makes up the difference, before
        its flush (``QueueLead``); a side whose host time is a quarter of its GPU time or more is first probed for a
        wait inside its calls (``_probe_waits``), once, before the batch; where it waits, it is led only by the work its
        call leaves running after it returns (a call that waits partway)."""
        called = self._audit_called[self._next_set]
        lead_events = self._lead_event_sets[self._next_set]
        pairs = self._pairs(len(fns) + 1)
        previous_end, self._last_end = self._last_end, (pairs[len(fns) - 1][1] if fns else None)
        labels = list(labels) if labels is not None else [None] * len(fns)
        self._probe_due(fns, labels)
        # Queued behind a batch still running: that batch's last end event not yet passed as this one is launched.
        behind = previous_end is not None and not previous_end.query()
        # Where it is: when it was first seen ended while this one was queued (epoch s), polled as the samples are.
        ahead_ended_at, polled_ns = None, time.perf_counter_ns()
        leads = {label: self.leads.lead_ms(label) for label in set(labels)} if self.leads else {}
        sleeps = []  # each lead: its sample's position in the batch, its cycles, its events
        last_queued = None  # the batch's last sample's number in ``QueuedWork``
        for index, (fn, (start, end), label) in enumerate(zip(fns, pairs, labels)):
            queued_at = time.perf_counter_ns()
            if behind and ahead_ended_at is None and queued_at - polled_ns >= AHEAD_POLL_NS:
                polled_ns = queued_at
                if previous_end.query():
                    ahead_ended_at = time.time()
            lead_ms = leads.get(label, 0.0)
            if lead_ms > 0:
                lead_ms -= self._queued.ahead_ms(queued_at)
            if lead_ms >= LEAD_MIN_MS:
                if len(lead_events) == len(sleeps):
                    lead_events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
                asleep, awake = lead_events[len(sleeps)]
                cycles = max(1, int(lead_ms * self._cycles_per_ms))
                asleep.record()
                torch.cuda._sleep(cycles)
                awake.record()
                sleeps.append((index, cycles, asleep, awake))
            else:
                lead_ms = 0.0
            self._flush()
            start.record()
            began = time.perf_counter_ns()
            fn()
            returned = time.perf_counter_ns()
            if self.leads is not None:
                self.leads.add(label, host_ms=(returned - began) / 1e6)
            if self.device_sync:
                torch.cuda.synchronize(self.device)  # every stream's work ends before the end event
            end.record()
            if self.leads is not None:
                last_queued = self._queued.add(end, *self.leads.left_behind(label, lead_ms, queued_at, returned))
        if behind and ahead_ended_at is None and previous_end.query():
            ahead_ended_at = time.time()
        return {
            "pairs": pairs,
            "samples": len(fns),
            "audited": False,
            "audit_called": called,
            "audit_sample": False,
            "labels": labels,
            "sleeps": sleeps,
            "lead_ms": 0.0,
            "last_queued": last_queued,
            "previous_end": previous_end,
            "behind": behind,
            "ahead_ended_at": ahead_ended_at,
            "gap_ms": None,
        }

    def close(self, handle: dict, audit=None) -> None:
        """Queue the audit call behind the batch, if any, then wait until the GPU has done both: the whole device,
        after an audit call; without one, the batch's last end event only, so a batch queued behind this one (the
        timing loop's next, queued before this one is closed) runs on meanwhile. A batch with an audit call is closed
        before anything else is queued: its call must follow its samples.

        The audit call is closed by a device-wide synchronisation before its end event, so it
        counts work on every stream. Where the GPU is still busy with the batch when the host
        launches it, its host-side launch cost is hidden like the samples'; where the host's work
        between ``launch`` and ``close`` outlasted a short batch, its launch latency is in it too.
        Either way what it adds beyond the events is alike for both sides (``integrity.py`` judges
        the candidate's excess over the reference's), plus any work the call left running on
        another stream.

        An event right after the audited call, before the synchronisation, times the call as the batch's
        events time its samples (the flush before it, the start event, the call, the end event, on the one
        stream). Where the batch's last end event is still pending once the call is queued, the GPU was busy
        all the while the host launched it, as it is for the batch's samples: that time is a sample
        (``audit_sample``); where the GPU had run out of queued work, its launch may lie inside it, and it is not.
        """
        count = handle["samples"]
        if audit is not None:
            if count and handle["pairs"][count - 1][1] is not self._last_end:  # its call must follow its samples
                raise RuntimeError("another batch was queued behind this one before its audit call")
            start, end = handle["pairs"][count]
            called = handle["audit_called"]
            self._flush()
            start.record()
            audit()
            called.record()
            handle["audit_sample"] = count > 0 and not handle["pairs"][count - 1][1].query()
            torch.cuda.synchronize(self.device)
            end.record()
            handle["audited"] = True
        if handle["audited"] or not count:
            torch.cuda.synchronize(self.device)
            self._queued.clear()
            return
        handle["pairs"][count - 1][1].synchronize()
        if handle["last_queued"] is not None:
            self._queued.done_through(handle["last_queued"])

    def times(self, handle: dict) -> tuple[list[float], float | None]:
        """The closed batch's sample times and its audit call's, in ms."""
        pairs, count = handle["pairs"], handle["samples"]
        times = [start.elapsed_time(end) for start, end in pairs[:count]]
        if self.leads is not None:
            for label, elapsed in zip(handle["labels"], times):
                self.leads.add(label, gpu_ms=elapsed)
            handle["lead_ms"] = sum(asleep.elapsed_time(awake) for _, _, asleep, awake in handle["sleeps"])
            if handle["lead_ms"] > 0:  # the rate the batch's leads ran at: the next batch's
                self._cycles_per_ms = sum(cycles for _, cycles, _, _ in handle["sleeps"]) / handle["lead_ms"]
        previous_end = handle["previous_end"]
        if previous_end is not None and count:  # its events stand until the third batch after it is launched
            handle["gap_ms"] = previous_end.elapsed_time(pairs[0][0])
        return times, pairs[count][0].elapsed_time(pairs[count][1]) if handle["audited"] else None

    def audit_sample(self, handle: dict) -> float | None:
        """The closed batch's audited call between its own start event and the event right after it, in ms, where
        it counts as a sample (``close``); else None."""
        if not handle["audit_sample"]:  # set only where ``close`` audited
            return None
        return handle["pairs"][handle["samples"]][0].elapsed_time(handle["audit_called"])

    def queued_behind(self, handle: dict) -> bool:
        """Whether the batch was queued behind one still running (its last end event not yet passed at the launch)."""
        return handle["behind"]

    def ahead_ended_at(self, handle: dict) -> float | None:
        """Where the batch was queued behind one still running: when that one was first seen ended while this one was
        being queued (epoch seconds; asked at most every ``AHEAD_POLL_NS`` as the samples are queued, and once more
        after the last), else None (it ended after this one's launch returned, or none ran ahead)."""
        return handle["ahead_ended_at"]

    def forget_last(self) -> None:
        """The batch launched last was thrown away: the next batch's ``gap_before`` is None, not a gap across the
        wait that came between."""
        self._last_end = None

    def gap_before(self, handle: dict) -> float | None:
        """From the last sample's end of the batch launched before this one to this one's first sample's start, in ms,
        on the GPU's clock (read by ``times``): the GPU's wait between the two (the first sample's flush and lead, if
        any, in it); None for the sampler's first batch and after ``forget_last``. Read within two batches of this
        one's, while that one's events still stand."""
        return handle["gap_ms"]

    def led(self, handle: dict) -> tuple[list[int], float]:
        """The positions in the batch of the samples that started behind a lead, and the leads' sum as the GPU's
        events timed them, ms (read by ``times``)."""
        return [index for index, _, _, _ in handle["sleeps"]], handle["lead_ms"]

    def span(self, handle: dict) -> float:
        """From the closed batch's first start event to its last end event, in ms, on the GPU's clock: its samples
        and what lay between them (the L2 flushes after the first, the events, any wait for the host's launches)."""
        pairs, count = handle["pairs"], handle["samples"]
        return pairs[0][0].elapsed_time(pairs[count - 1][1]) if count else 0.0


def _sleep_cycles_per_ms(device: torch.device | None = None) -> float:
    """The rate of ``torch.cuda._sleep`` on ``device`` (None: the current one), SM cycles per ms of its events: one
    sleep of ``LEAD_CALIBRATION_CYCLES`` timed, after one that loads it."""
    with torch.cuda.device(device):
        torch.cuda._sleep(LEAD_CALIBRATION_CYCLES // 100)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(LEAD_CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
    return LEAD_CALIBRATION_CYCLES / max(start.elapsed_time(end), 1e-3)
