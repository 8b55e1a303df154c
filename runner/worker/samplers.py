"""How one batch of timing samples is taken: on the host clock, or with CUDA events on a GPU.

A sampler queues a batch of calls (``launch``), closes it (``close``: the audit call, if any, and
the synchronisation after which the batch is done) and reads its times (``times``), the audited call's own
time where it counts as a sample (``audit_sample``) and its span, from the first sample's start to the last
one's end (``span``), so the timing loop (``timing.py``) can queue the next batch before it reads the last.
The CUDA sampler flushes the L2 outside the timed region before every sample in cold mode. ``warm_up`` runs a closure
before its measurement. This module decides nothing about when to stop or what to keep.
"""

from __future__ import annotations

import math
import time

import torch


def warm_up(fns, sampler, warmup_ms: float) -> float:
    """One round of ``fns`` (both sides of a measurement) in turn, two more where it was shorter than
    ``LONG_ROUND_MS``, queued as one batch (the first calls may compile or load: on the host, as they are queued),
    then the rest of ``warmup_ms``, the sides together, in batches of rounds sized from the first: a
    synchronisation per batch, not one per call or round. A warm-up runs beside the last measurement's checks
    after timing, whose every wait for the device then waits for a time slice too, and the next measurement waits
    for both (it was three batches of one round: BENCHMARKS.md, twenty-ninth session). The sides share it: what a
    warm-up settles (clocks, the caching allocator, lazily loaded code) is the GPU's or each side's first calls,
    not a time per side (it was ``warmup_ms`` per side, BENCHMARKS.md, thirteenth session). Returns the shortest
    of the first rounds, ms."""
    fns = list(fns)
    times = run_batch(sampler, fns)[0]
    rounds = 1
    if sum(times) < LONG_ROUND_MS:
        times += run_batch(sampler, fns * 2)[0]
        rounds = 3
    shortest = _shortest_round(times, len(fns))
    spent = sum(times)
    while spent < warmup_ms and rounds < MAX_WARMUP_ROUNDS:
        per_round = max(_shortest_round(times, len(fns)), 1e-3)
        size = max(1, min(math.ceil((warmup_ms - spent) / per_round), MAX_WARMUP_ROUNDS - rounds))
        times = run_batch(sampler, fns * size)[0]
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
# size is read off the shortest (``timing.batch_pairs``), and a round this long already fills the least batch
# (20 pairs) with 50 ms, ``h100_fullsuite``'s ``batch_min_ms``.
LONG_ROUND_MS = 2.5


def run_batch(sampler, fns, audit=None) -> tuple[list[float], float | None]:
    """One batch on either sampler, start to end: launched, closed (with the audit call, if any), read."""
    handle = sampler.launch(fns)
    sampler.close(handle, audit)
    return sampler.times(handle)


class HostSampler:
    """The host clock: each call runs as it is launched, so a batch is done when ``launch`` returns."""

    clock = "host_perf_counter"
    flushes = False
    flush_bytes = None

    def launch(self, fns) -> dict:
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

    def span(self, handle: dict) -> float:
        """From the batch's first sample's start to its last one's end, in ms."""
        return handle["span"]


class CudaSampler:
    """CUDA events around every sample, queued a batch at a time; two sets of events, so one batch can
    be read while the next runs."""

    clock = "cuda_events"

    def __init__(self, device: torch.device, cold: bool, device_sync: bool, l2_multiple: float) -> None:
        self.device = device
        self.flushes = cold
        self.device_sync = device_sync
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
        # ``l2_multiple`` L2 sizes (at least 64 MiB at two), written before every sample (TimingSettings).
        size = int(l2_multiple * max(l2_bytes, 32 << 20))
        self.flush_buffer = torch.empty(size, dtype=torch.int8, device=device) if cold else None
        self.flush_bytes = size if cold else None
        self._event_sets: list[list[tuple[torch.cuda.Event, torch.cuda.Event]]] = [[], []]
        # Per set, the event recorded right after an audited call (``close``).
        self._audit_called = [torch.cuda.Event(enable_timing=True) for _ in self._event_sets]
        self._next_set = 0

    def _flush(self) -> None:
        """Evict the L2 outside the timed region (cold mode)."""
        if self.flush_buffer is not None:
            self.flush_buffer.zero_()

    def _pairs(self, count: int):
        events = self._event_sets[self._next_set]
        self._next_set ^= 1
        while len(events) < count:
            events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        return events[:count]

    def launch(self, fns) -> dict:
        """Queue one sample per function; returns at once (unless every sample is closed by a device-wide
        synchronisation, ``sync="device"``), the GPU still working on them."""
        called = self._audit_called[self._next_set]
        pairs = self._pairs(len(fns) + 1)
        for fn, (start, end) in zip(fns, pairs):
            self._flush()
            start.record()
            fn()
            if self.device_sync:
                torch.cuda.synchronize(self.device)  # every stream's work ends before the end event
            end.record()
        return {"pairs": pairs, "samples": len(fns), "audited": False, "audit_called": called, "audit_sample": False}

    def close(self, handle: dict, audit=None) -> None:
        """Queue the audit call behind the batch, if any, then wait until the GPU has done both.

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
        if audit is not None:
            start, end = handle["pairs"][handle["samples"]]
            called = handle["audit_called"]
            self._flush()
            start.record()
            audit()
            called.record()
            count = handle["samples"]
            handle["audit_sample"] = count > 0 and not handle["pairs"][count - 1][1].query()
            torch.cuda.synchronize(self.device)
            end.record()
            handle["audited"] = True
        torch.cuda.synchronize(self.device)

    def times(self, handle: dict) -> tuple[list[float], float | None]:
        """The closed batch's sample times and its audit call's, in ms."""
        pairs, count = handle["pairs"], handle["samples"]
        times = [start.elapsed_time(end) for start, end in pairs[:count]]
        return times, pairs[count][0].elapsed_time(pairs[count][1]) if handle["audited"] else None

    def audit_sample(self, handle: dict) -> float | None:
        """The closed batch's audited call between its own start event and the event right after it, in ms, where
        it counts as a sample (``close``); else None."""
        if not handle["audit_sample"]:  # set only where ``close`` audited
            return None
        return handle["pairs"][handle["samples"]][0].elapsed_time(handle["audit_called"])

    def span(self, handle: dict) -> float:
        """From the closed batch's first start event to its last end event, in ms, on the GPU's clock: its samples
        and what lay between them (the L2 flushes after the first, the events, any wait for the host's launches)."""
        pairs, count = handle["pairs"], handle["samples"]
        return pairs[0][0].elapsed_time(pairs[count - 1][1]) if count else 0.0
