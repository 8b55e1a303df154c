"""How much work a timing sample needs queued ahead of it on the GPU (``QueueLead``: its side's host time to queue a
call, at most its GPU time), and how much is (``QueuedWork``): where less is queued, the CUDA sampler
(``samplers.CudaSampler``) starts the sample behind a GPU sleep that makes up the difference, so a call that takes the
host about as long as the GPU runs at the GPU's pace, not at its launches'. Policy and bookkeeping only: the sleeps,
the probe for calls that wait for the device and the events are the sampler's."""

from __future__ import annotations

import collections
import statistics

# A lead is at most this long (ms), whatever the side's host time: a call that waits for the device inside (its host time
# is then its GPU time, or more) is not led for longer than it runs, nor anything for longer than this.
LEAD_MAX_MS = 5.0
# Each side's lead is the median of its last this many calls' host and GPU times.
LEAD_HISTORY = 64
# A side is probed for a wait inside its calls where its host time is this share of its GPU time or more (``to_probe``,
# from its history; ``CudaSampler._probe_waits``, from one call on an empty queue: under it the side is settled as not
# waiting with no try). A call that waits partway returns while the work queued after its wait still runs, so its host
# time can fall well under its GPU time: torch_compile's batched_solve_small_fp32 factors on the GPU, waits to check the
# factors on the host, then queues the solves. Its call took the host 4.04 ms of 5.44 (0.74) in the H100's cold pass,
# was settled as not waiting and led by 3.5 ms, and 7.56 of 8.94 (0.85) in the warm pass, tried and found waiting, not
# led: the speedup moved 3.09% between the two passes (BENCHMARKS.md, seventieth session). With the probe's call at a
# quarter and the history at three quarters, a side whose warm-up call ran on an empty queue (2 of 5 ms) was still led
# by its history in its first batch, before the probe (tests/test_gpu.py on the H100, seventy-first session): both now
# take a quarter. topk_logits_llama3's kind (0.18 ms of host for 3.15 on the GPU, sixty-eighth session) stays settled.
WAIT_PROBE_CALL_SHARE = 0.25
# Where the probe's call on the empty queue took the host under this share of its GPU time, the side's leads go by that
# call's host time (``paces``), not by its history's.
WAIT_PROBE_HOST_SHARE = 0.75
# A side whose probe timed its host's pace on an empty queue (``QueueLead.paces``) is led by at most this many times
# that call's host time, whatever its history says. The history of a side whose host is well ahead of its GPU work
# holds, past the first samples of a batch, the GPU's pace: a call queued behind a full launch queue returns only as
# the GPU frees room (topk_logits_llama3 on the H100: 0.18 ms on an empty queue, 3.09 ms once about forty samples are
# queued ahead; BENCHMARKS.md, sixty-eighth session), and a lead of that much sleeps where none is needed. Three times:
# the first call after a synchronisation took up to 2.3 times the empty queue's median on the H100 (same session, five
# tasks: attention_sliding_window_mistral_bf16 1.14 ms for 0.49), the calls after it within 10% of it.
PACED_LEAD_MARGIN = 3.0
# A side found waiting is led by the GPU work its probe's call left running after it returned
# (``QueueLead.left_running``: a call that waits partway) where that is at least this long, ms. A call that waits at
# its end leaves none: on the H100 (seventy-fourth session) the eager references of cholesky, inv_3x3 and batched_solve
# took the host 0.02-0.09 ms longer than their GPU time on the empty queue, while batched_solve's compiled candidate
# left its solves running for 1.44 and 1.27 ms of 21.38 and 5.29 (its cold pass's host held up by the compiles beside,
# its warm pass's not).
WAITING_LEAD_MIN_MS = 0.1


def may_wait(host_ms: float, gpu_ms: float) -> bool:
    """Whether a call that took the host ``host_ms`` for ``gpu_ms`` of GPU work may be waiting for the device inside:
    its host at ``WAIT_PROBE_CALL_SHARE`` of its GPU time or more. One rule for a side's history (``QueueLead.to_probe``)
    and for the probe's own call on an empty queue (``CudaSampler._probe_waits``): the two held different shares once,
    and a side its history left unprobed was led before its probe (seventy-first session)."""
    return host_ms >= WAIT_PROBE_CALL_SHARE * gpu_ms


class QueueLead:
    """How much work a sample of each side needs queued ahead of it on the GPU: its side's host time to queue one call
    (median of the last ``LEAD_HISTORY``), at most its GPU time (same median) and ``LEAD_MAX_MS``; none until the side
    has both. Where less is queued (``QueuedWork``), the sample starts behind a GPU sleep that makes up the difference.

    Why: a call whose host work takes about as long as its GPU work (a batched potrf's many launches, say) runs at
    the GPU's pace where work is queued ahead of it, and at the host's where the queue is empty or short, its events
    then timing the host's launches too. Samples of one side in a row keep the queue filled; in the timing loop's
    interleaved order a call that waits for the device inside (``torch.linalg.cholesky`` and ``torch.linalg.solve``
    check their results on the host) empties it before the other side's next sample, and a short call queued ahead
    of a slow-to-launch one holds less than its launches take. torch_compile's candidate (which checks on the device)
    ran cholesky_spd_blocks_fp32 at 3.68-3.69 ms in runs of its own samples and at 3.74-3.95 ms interleaved with the
    eager reference (BENCHMARKS.md, fifty-eighth session); sort_moe_expert_ids_stable_int32's candidate (0.23 ms on the
    GPU), its host slowed by the compiles beside a cold pass, took 0.33 ms (median) behind a reference sample still
    running and 0.23 ms only behind a lead (fifty-ninth session). With the lead, such a sample starts with its call
    queued ahead of the GPU, as it does after a sample of its own side, whichever side came before.

    A side whose calls wait for the device inside is not led by its host time (``waits``, found by ``CudaSampler``'s
    probe): past its first wait it runs at the host's pace whatever was queued ahead, and its host time, which covers
    its GPU time, made its lead its whole GPU time. Led so, batched_solve_small_fp32's sides (both wait) slept 3.7 and
    4.6 s of the H200's torch_compile passes, 1.4% and 1.3% of their wall time, and took 3.29 and 3.39 ms led against
    3.21 and 3.37 behind their own side unled; cholesky's and inv_3x3's references moved by 0.0-0.5% led (sixtieth
    session). A call that waits partway returns with work still running: torch_compile's batched_solve factors on the
    GPU, waits to check the factors on the host, then queues the solves and returns. Behind a sample of its own side
    its factoring is queued while the last call's solves run; behind the eager reference, which waits at its end, the
    queue is empty and the factoring's launches lie in the sample: 3.81 ms behind its own side, 4.04 behind the other
    and 4.11 first in a batch on the H100 (seventy-fourth session, ``runner.bench paced``). Such a side is led by what
    its probe's call left running (``left_running``), so its samples start behind as much work as behind its own: led
    so (1.35 ms), it took 3.509 ms behind the reference and 3.510 behind its own side on another H100 (seventy-fifth
    session). Behind its own side its lead tops up only the microseconds the host took between the two calls (33-48 us
    a sample there, 2.8 ms of sleep in a 3.6 s evaluation), which counts those samples as led.

    The cap at the side's GPU time keeps a lead from sleeping longer than the call it leads runs; its price is paid by
    a side whose host is slower than its GPU work where little is queued: a batch's first sample of it, behind one
    sample of the other side, keeps what its lead cannot cover of its host's pace (0.4 ms of host for 0.23 ms of GPU:
    0.36-0.40 ms, tests/test_queue_lead.py). 22 of 444 sides of the sixtieth session's warm pass had their lead at the
    cap; the 20 compiled candidates among them were led in at most 4% of their samples (BENCHMARKS.md, sixty-third
    session)."""

    def __init__(self) -> None:
        self._host: dict[str, collections.deque] = {}
        self._gpu: dict[str, collections.deque] = {}
        # Each side's host and GPU medians, once asked, until the side's next call of that kind: ``launch`` asks for
        # them once or more per side per batch, between two batches.
        self._host_median: dict[str, float] = {}
        self._gpu_median: dict[str, float] = {}
        # Per side probed (``CudaSampler``'s wait probe): whether its calls wait for the device inside; such a side is
        # not led.
        self.waits: dict[str, bool] = {}
        # Per side the probe settled with one call on an empty queue: that call's host time (ms), its host's own pace,
        # where its history may hold the GPU's (calls that found the launch queue full).
        self.paces: dict[str, float] = {}
        # Per side found waiting whose probe's call returned with its GPU work still running: how much was left (its
        # GPU time less its host time, ms; ``WAITING_LEAD_MIN_MS`` at least), the side's lead (``lead_ms``).
        self.left_running: dict[str, float] = {}

    def add(self, label: str | None, host_ms: float | None = None, gpu_ms: float | None = None) -> None:
        """One call of ``label``'s side: its host time (from before the call to its return) or its GPU time."""
        if label is None:
            return
        for times, medians, value in ((self._host, self._host_median, host_ms), (self._gpu, self._gpu_median, gpu_ms)):
            if value is not None:
                times.setdefault(label, collections.deque(maxlen=LEAD_HISTORY)).append(value)
                medians.pop(label, None)

    @staticmethod
    def _median(times: dict, medians: dict, label: str | None) -> float:
        """The median of ``label``'s history in ``times``, kept in ``medians`` until it changes; 0.0 without one."""
        if label not in medians:
            history = times.get(label)
            medians[label] = statistics.median(history) if history else 0.0
        return medians[label]

    def _known(self, label: str | None) -> bool:
        """Whether ``label``'s side has a history of both kinds."""
        return bool(self._host.get(label)) and bool(self._gpu.get(label))

    def gpu_ms(self, label: str | None) -> float:
        """The GPU time of a call of ``label``'s side (median of the last ``LEAD_HISTORY``), ms; 0.0 without one."""
        return self._median(self._gpu, self._gpu_median, label)

    def host_ms(self, label: str | None) -> float:
        """The host time to queue a call of ``label``'s side (median of the last ``LEAD_HISTORY``), ms; 0.0 without
        one."""
        return self._median(self._host, self._host_median, label)

    def lead_ms(self, label: str | None) -> float:
        """The work a sample of ``label``'s side needs queued ahead of it, ms; 0.0 where it has no history of both
        kinds. Where its calls wait for the device inside (``waits``), the work its probe's call left running after it
        returned (``left_running``: a call that waits partway; none for one that waits at its end). Where the probe
        timed the side's pace on an empty queue (``paces``), at most ``PACED_LEAD_MARGIN`` times that."""
        if not self._known(label):
            return 0.0
        if self.waits.get(label):
            return min(self.left_running.get(label, 0.0), self.gpu_ms(label), LEAD_MAX_MS)
        pace_ms = self.paces.get(label)
        host_ms = self.host_ms(label) if pace_ms is None else min(self.host_ms(label), PACED_LEAD_MARGIN * pace_ms)
        return min(host_ms, self.gpu_ms(label), LEAD_MAX_MS)

    def left_behind(self, label: str | None, lead_ms: float, queued_at_ns: int, returned_ns: int) -> tuple[int, float]:
        """What a sample of ``label``'s side leaves on the GPU for the next (``QueuedWork.add``): from when the host
        began queueing it (``queued_at_ns``), its lead and its side's GPU time; for a side that waits inside its calls,
        from its call's return (``returned_ns``), the work its probe's call left running (``left_running``; none for a
        call that waits at its end). Counted from its queueing, a call that waits partway looks done by its return, its
        host's time being about its GPU time: the next sample of its own side found nothing ahead and slept its whole
        lead behind the solves still running (194 of 200 samples a side in
        ``tests/test_queue_lead.py::test_a_side_that_waits_partway_is_probed_before_its_first_led_sample``)."""
        if self.waits.get(label):
            return returned_ns, self.left_running.get(label, 0.0)
        return queued_at_ns, lead_ms + self.gpu_ms(label)

    def to_probe(self, label: str | None) -> bool:
        """Whether ``label``'s side is yet to be probed for a wait inside its calls: it has both histories, and its
        host time is ``WAIT_PROBE_CALL_SHARE`` of its GPU time or more (a call that waits for its work holds the host
        until that work is done, and one that waits partway at least that long; a side whose host is far ahead of its
        GPU work cannot be waiting for it)."""
        if label is None or label in self.waits or not self._known(label):
            return False
        return may_wait(self.host_ms(label), self.gpu_ms(label))


class QueuedWork:
    """The samples queued on the GPU and not known to be done, each with its end event, when the host began queueing
    it and its GPU time as expected (its lead and its side's ``QueueLead.gpu_ms``), and how much of that work lies
    ahead of the next sample.

    The oldest one not done may have run for as long as it has been queued, so only what its expected time leaves of
    that counts (its least); every later one's expected time counts whole (none can have started). An end event the
    GPU has passed is dropped, the oldest first. A call that waited for the device inside is counted from its return,
    with what it leaves running then (``QueueLead.left_behind``): nothing for one that waits at its end, however soon
    its end event is asked (the GPU gets to it microseconds after the host records it). Each sample gets a number in
    the order it was queued (``add``), so a batch closed while the next is in flight drops its own samples only
    (``done_through``)."""

    def __init__(self) -> None:
        self._samples: collections.deque = collections.deque()  # (number, end event, queued at ns, expected ms)
        self._expected_ms = 0.0  # their expected times' sum
        self._added = 0  # samples ever added: the next one's number

    def add(self, end, queued_at_ns: int, expected_ms: float) -> int:
        """One sample queued; returns its number."""
        self._samples.append((self._added, end, queued_at_ns, expected_ms))
        self._expected_ms += expected_ms
        self._added += 1
        return self._added - 1

    def ahead_ms(self, now_ns: int) -> float:
        """The work still queued at ``now_ns``, ms: the later samples' expected times, and the least of the oldest's
        that is left."""
        self._drop_while(lambda number, end: end.query())
        if not self._samples:
            return 0.0
        _, _, queued_at_ns, oldest_ms = self._samples[0]
        return self._expected_ms - oldest_ms + max(0.0, oldest_ms - (now_ns - queued_at_ns) / 1e6)

    def done_through(self, number: int) -> None:
        """The samples numbered up to ``number`` are done (their batch was waited for); later ones may not be."""
        self._drop_while(lambda queued, end: queued <= number)

    def _drop_while(self, done) -> None:
        """Drop the oldest samples while ``done(number, end event)`` says so, and their expected times."""
        samples = self._samples
        while samples and done(samples[0][0], samples[0][1]):
            self._expected_ms -= samples.popleft()[3]
        if not samples:
            self._expected_ms = 0.0

    def clear(self) -> None:
        """Everything queued is done (after a synchronisation)."""
        self._samples.clear()
        self._expected_ms = 0.0
