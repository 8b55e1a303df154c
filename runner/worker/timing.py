"""The timing engine: reference and candidate measured in one process, interleaved.

Each sample times one call of a zero-argument closure. Reference and candidate samples
alternate in a random order so that drift (clocks, temperature, other tenants) hits both
sides equally. On a GPU: the L2 cache is flushed outside the timed region before every
sample ("cold"), CUDA events bracket the call, and events are queued for a whole batch with
one wait per batch so the host never makes the GPU wait; a sample that finds less work queued ahead of it
than its side takes the host to queue a call (the call before it waited for the device, its batch is the first since
an audit's synchronisation, or a quick call before a slow one) starts behind a GPU sleep that makes up the difference
(``queue_lead.QueueLead``, ``queue_lead.QueuedWork``). The loop runs one batch
ahead: the next batch is queued behind the last one while that still runs, then the last one is waited for (its own
last end event), read, judged and added to the noise estimate, so that the GPU goes from one batch to the next without
waiting for the host, and host work (NVML, statistics) overlaps the GPU's; a batch with an audit call is closed, the
device waited for, before the next is queued. Sampling stops when the
estimated relative noise of the median ratio is under the target (after a minimum count and,
like nvbench's ``--min-time``, a minimum measured time per side), or at a sample or time cap (the rule and the
batches' size: ``stopping.py``; the medians and their noise: ``median_noise.py``).
On a CPU the same loop runs on the host clock. The warm-up comes before the measurement's turn: in the
worker it runs while the measurement queues for the device (``DeviceToken.approach``), beside the
shared work still running, and the samples start once the turn is taken.

The GPU's clocks are read once per batch, while it runs (``clocks.py``); each batch is judged
one batch late, by the readings taken while the batches before and after it ran (which bracket
it whole) and the one taken during it. A batch slowed by heat or a hardware slowdown is thrown
away with the batch queued behind it, and taken again once the slowdown has cleared (the GPU idles
up to ``cooldown_s`` for that; a measurement that keeps no batch raises ``GpuThrottled``: the
GPU's failure, not the candidate's). Power-capped batches are counted, and thrown away too with
``discard_power_capped``. Each kept sample records its SM clock. A batch may also end
with one audit call of one side, closed by a device-wide synchronisation: while a side has fewer
than ``MIN_AUDITS`` kept, every batch audits the side with fewer (the first drawn at random), then a
share of the later batches (``audit_share``, drawn from the seed), the sides alternating; neither the
noise target nor the time cap stops the sampling before each side has ``MIN_AUDITS``. One audit alone
can be slowed by something else: a reference measured against itself on the H100 had one audit of
28.2 ms for a 3.5 ms call, and with that audit its only one the candidate side was flagged
(BENCHMARKS.md, fifteenth session); the median of three is not moved by one. The gap between the
audited and the event-timed medians exposes work left running on another stream (``sync_gap_ms``;
judged in ``integrity.py``). The audited call itself, between its own start event and one recorded right
after it (before the synchronisation), is a sample like the batch's where the batch still ran once the call
was queued (``CudaSampler.close``): 3.7 s of a full suite's 4.2 s of audits on the H100 were those calls,
the GPU's work left out of every side's samples (BENCHMARKS.md, thirty-first session). Such samples count in
each side's median, quartiles, noise and measured time, and are kept apart in ``samples.json``
(``audit_samples``, with their batch and clock), so every batch keeps ``batch`` samples of each side.
An audited batch follows a synchronisation or a chain of unaudited batches queued behind one another, and each side's
audits of the two shapes are judged apart, the larger gap counting (``runner/worker/sync_audits.py``, which owns the
judgement after the last batch). Where the measurement's audits would flag it and a side holds fewer than
``MIN_AUDITS`` of one shape, fresh audits bring that shape up to ``MIN_AUDITS`` and are judged with the measured ones
(``audit_top_up``); where they still would, ``RECHECK_AUDITS`` fresh audits of each side in each shape are taken
before the turn ends, closing batches made as the measured ones are, whose samples are not kept (their
audited calls neither), and the gap of those alone is judged (``audit_recheck`` records the first): a
reference measured against itself on the H100 while other processes made CUDA contexts had audits of
0.86-4.9 ms for a 0.715 ms call (medians 3.60 ms on the candidate side, 1.33 on the reference's) and was
flagged with an excess of 2.28 ms (BENCHMARKS.md, seventeenth session). Work left on another stream
lengthens every audit, the fresh ones too; a disturbance that has passed does not. ``sync="device"``
closes every sample that way; ``graphs=True`` replays each side as a CUDA graph, keeping launch overhead
out.

Where the inputs and outputs lie in memory moves some kernels' times by more than the noise of one
placement (a transpose's speedup by up to 5% on the H100, where one measurement's ratio noise was
0.1-0.2%: BENCHMARKS.md, twelfth session), and one process sees one placement, so two passes would
differ by it. Each side may therefore come as several closures, the same call on input sets,
outputs and a copy of the weights at other addresses (placements, ``placements.py``); each batch samples the placement
with the fewest batches so far (the first in order among them: in turn), the noise target may stop the sampling only
once each has been sampled, and the median pools them all. How far the placements' own speedups lie apart is reported
(``placement_spread``, ``placement_noise``). More samples of the same placements would not narrow it, more placements
do: where the measurement may make them (``grow``), it judges its placements once each has three batches (and again
at each round after while they call for none: a disturbed start can hide their spread), and where their speedups differ
beyond their batches' own noise by enough to leave an error over ``target_noise`` on their mean
(``placement_judge.py``), it makes as many again (up to ``max_placements``, within ``time_cap_s``) and samples them
until they have caught up.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from runner.worker.clocks import ClockMonitor, device_uuid
from runner.worker.host_cpu import waited_ns
from runner.worker.kept_batches import KeptBatches
from runner.worker.placement_judge import (
    judging_due,
    placement_spread,
    placements_wanted,
    sampled_enough,
    sampled_enough_after,
)
from runner.worker.protocol import SIDES, Timing, TimingSettings
from runner.worker.quiet_turn import QuietTurn
from runner.worker.samplers import CudaSampler, HostSampler, run_batch, warm_up
from runner.worker.stopping import (
    audit_counts,
    audited_enough,
    batch_order,
    batch_pairs,
    enough,
    likely_enough,
    sized_short,
)
from runner.worker.sync_audits import MIN_AUDITS, judged_sync_gaps


class GpuThrottled(RuntimeError):
    """No batch of samples ran at full speed: the GPU's fault (heat, hardware slowdown), not the candidate's."""


@dataclass
class Instruments:
    """What one measurement reads its times and the GPU's clocks with."""

    sampler: CudaSampler | HostSampler
    monitor: ClockMonitor


def instruments(device: torch.device, settings: TimingSettings) -> Instruments:
    """The sampler (on a GPU: its events and its L2 flush buffer) and the clock monitor (NVML's handle) for
    ``device``. Built before the measurement's turn, they keep their set-up out of it: in the fifteenth
    session's full suite (BENCHMARKS.md) built inside, they took 9 ms of a turn (median; p90 35 ms, max
    171 ms), 3.5 s of its 327 s, with nothing measured."""
    cuda = device.type == "cuda"
    sampler = (
        CudaSampler(
            device, settings.cold, settings.sync == "device", settings.flush_l2_multiple, settings.lead_dry_queue
        )
        if cuda
        else HostSampler()
    )
    return Instruments(sampler, ClockMonitor(device_uuid(device)))


@contextmanager
def collector_paused():
    """Python's cyclic collector off for the block, and on again after it where it was on: the host does no
    collection while it queues samples. Reference counting still frees what the block drops."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


# Python's collector paused for the whole measurement, so no collection lands inside a sample or holds the host
# while a short batch's queued work runs out: a full one scans every object the process tracks (85 ms over the
# 207,000 of torch's stack and the worker, this machine; a worker on the H100 held 616,000 as its job began, most
# of them frozen since: runner/worker/evaluate.py). It was not what idled the GPU around the batches in the turns:
# that time stayed as it was (BENCHMARKS.md, twenty-ninth session).
@collector_paused()
def measure_pair(
    reference,
    candidate,
    device: torch.device,
    settings: TimingSettings,
    shape: str,
    seed: int,
    *,
    tools: Instruments | None = None,
    turn: Callable[[], None] | None = None,
    grow: Callable[[int], list[tuple]] | None = None,
    quiet: QuietTurn | None = None,
) -> tuple[Timing, dict]:
    """Time ``reference`` and ``candidate``: each a zero-argument closure, or a list of them, one per
    placement (the same call on inputs, outputs and weights at other addresses; both lists equally long).
    Returns the summary and the raw samples.

    ``seed`` drives the random interleaving order, so a rerun samples in the same order. ``tools``: built
    by ``instruments`` beforehand, else here. ``turn``: called between the warm-up and the first sample,
    it returns once the measurement has the device to itself (the worker's exclusive turn, where the
    warm-up ran beside shared work while it queued: ``DeviceToken.approach``); the timing window starts
    after it. ``grow``: asked for up to N more placements during the turn where the placements' speedups call for
    them, it returns the (reference, candidate) closures of those it made (fewer, or none, where memory is short).
    ``quiet``: held (``QuietTurn.hold``) from the first batch launched once a side is known to wait for the device
    inside its calls (its lead's probe); the caller lets it go after the turn.
    """
    cuda = device.type == "cuda"
    references = list(reference) if isinstance(reference, (list, tuple)) else [reference]
    candidates = list(candidate) if isinstance(candidate, (list, tuple)) else [candidate]
    if len(references) != len(candidates) or not references:
        raise ValueError(f"{len(references)} reference and {len(candidates)} candidate placements")
    graphs = "off"
    if cuda and settings.graphs:
        try:
            references = [_as_graph(fn, device) for fn in references]
            candidates = [_as_graph(fn, device) for fn in candidates]
            graphs = "on"
        except Exception as exc:  # not capturable (host sync, side stream...): both sides eager
            graphs = f"capture failed: {type(exc).__name__}: {exc}"[:300]
            torch.cuda.synchronize(device)
    tools = tools or instruments(device, settings)
    sampler, monitor = tools.sampler, tools.monitor
    first_pair = [references[0], candidates[0]]  # other placements: the same code
    pair_ms = warm_up(first_pair, sampler, settings.warmup_ms, labels=SIDES)
    sizing = {"warm_up": round(pair_ms, 6)}
    # The reading before the first batch, taken before the turn: its 2-5 ms (NVML, on the H100) then run beside the
    # last measurement's checks after timing, not in the turn. Whatever slowed the GPU from here to the first batch
    # counts against that batch, which is then taken again.
    readings = [monitor.read()] if monitor.available else None
    leads = getattr(sampler, "leads", None)  # the CUDA sampler's, where it leads (queue_lead.QueueLead)
    probed_before_turn = sampler.probe_s if leads is not None else 0.0
    waited = 0.0
    if turn is not None:
        asked = time.perf_counter()
        turn()
        waited = time.perf_counter() - asked
        # One more round where the warm-up lies further back than it lasted, or where the batches' size hangs on it:
        # the warm-up ran beside shared work, whose time slices its round's times took in.
        if waited > max(settings.warmup_ms / 1000.0, REWARM_AFTER_S) or sized_short(settings, pair_ms):
            in_turn = sum(run_batch(sampler, first_pair, labels=SIDES)[0])
            sizing["in_turn"] = round(in_turn, 6)
            pair_ms = min(pair_ms, in_turn)
    batch = batch_pairs(settings, pair_ms)
    window_start = time.time()
    started = time.perf_counter()
    # Each placement's two closures by side: what a batch of it calls, and its audit call.
    placements = [{"reference": r, "candidate": c} for r, c in zip(references, candidates)]
    rng = random.Random(seed)
    sides = SIDES
    kept = KeptBatches()
    launched_at_placement = [0] * len(placements)  # batches launched at each placement (the next: the fewest)
    kept_at_placement = [0] * len(placements)
    added = 0
    # Placements are judged once each has JUDGED_BATCHES, and again at each round after while more can be made
    # (``placement_judge.judging_due``); none where none can be made.
    growing = grow is not None and len(placements) < settings.max_placements
    judged_count = 0 if growing else len(placements)
    judged_round = 0  # the fewest batches of a placement when they were last judged
    cooled = 0.0
    power_capped = 0
    first_audited = rng.randrange(2)
    audit_draws = random.Random(f"{seed}-audits")
    audits_taken = 0
    stop_reason = "max_samples"
    stopping = False
    noise = math.inf  # of the samples kept so far: computed once per judged batch, read by the prediction too
    auditing = cuda and settings.sync == "events"
    # One batch ahead: batch j is queued behind batch j - 1 while j - 1 still runs, then j - 1 is waited for, read
    # and judged, so the GPU goes from one to the next without waiting for the host, and the NVML reading, the
    # judgement and the noise of j - 1 happen while the GPU runs j. A batch with an audit call is closed before the
    # next is queued (its call follows its samples, and its synchronisation waits for the whole device), and so is
    # every batch where the sampler runs each as it is launched (``queues_ahead``: the host clock). The reading
    # taken once j - 1 is closed falls inside j; the ones taken one cycle before and after it bracket j whole
    # (``readings[-3:]`` when j is judged).
    pending: Queued | None = None  # queued last cycle, not judged yet
    while True:
        current = None
        waiting = len(pending.order) // 2 if pending else 0
        # No batch is queued behind one that will probably end the measurement: if it does not, the next
        # is queued after it was judged (one idle moment); if it does, no batch was measured for nothing.
        last_likely = pending is not None and likely_enough(
            kept.side_ms,
            kept.pairs,
            noise,
            kept.audits,
            pending,
            settings,
            auditing,
            sampled_enough_after(kept_at_placement, pending.placement, judged_count),
        )
        if not stopping and not last_likely and kept.pairs + waiting < settings.max_samples:
            if quiet is not None and leads is not None and not quiet.asked and any(leads.waits.values()):
                quiet.hold()  # a side waits for the device: no other context made from this batch on (quiet_turn.py)
            order = batch_order(rng, batch)
            # The side with fewer audits kept while one has fewer than MIN_AUDITS (queued ones counted), from a
            # random start; then one side, alternating, where a draw under ``audit_share`` says so (its own
            # generator: the order above stays the seed's).
            audited = None
            if auditing:
                owed = audit_counts(kept.audits, pending)
                due = sides[(first_audited + audits_taken) % 2]  # the alternation's next side
                if min(owed.values()) < MIN_AUDITS:
                    audited = min(sides, key=lambda side: (owed[side], side != due))
                elif audit_draws.random() < settings.audit_share:
                    audited = due
                audits_taken += audited is not None
            placement = min(range(len(placements)), key=launched_at_placement.__getitem__)
            launched_at_placement[placement] += 1
            calls = placements[placement]
            # ``pending``, where it is closed before the next batch is queued, is closed only now: the next batch's
            # order, audit and placement were drawn while it still ran, and from its close the device idles until
            # the next batch's first sample.
            if pending is not None and _closed_before_the_next(sampler, pending):
                _close(sampler, pending, placements)
            launched_at, waited_at_launch = time.time(), waited_ns()
            handle = sampler.launch([calls[side] for side in order], order)
            current = Queued(order, audited, handle, placement, launched_at, waited_at_launch=waited_at_launch)
            if pending is not None and sampler.queued_behind(handle):
                current.chain = pending.chain + 1
        elif pending is None:
            break  # stopped, or at the sample cap
        if pending is not None and pending.closed_at is None:
            _close(sampler, pending, placements)
        if current is not None and current.chain:
            # Queued behind ``pending`` while it still ran: the two windows meet where ``pending`` ended, as seen while
            # ``current`` was queued, else where its close returned (it ended after ``current``'s launch: the host
            # was waiting for it). The host's wait over ``current`` starts at that close.
            seen_ended = sampler.ahead_ended_at(current.handle)
            pending.ended_at = current.launched_at = seen_ended if seen_ended is not None else pending.closed_at
            current.waited_at_launch = pending.waited_at_close
        if readings is not None:
            readings.append(monitor.read())  # while ``current`` runs; after ``pending``, the last, otherwise
        if pending is not None:
            times, audit_ms = sampler.times(pending.handle)
            batch_clock = None
            if readings is not None:
                before, during, after = readings[-3:]
                batch_clock = monitor.judge(before, after, settings.discard_power_capped, during)
            if batch_clock is not None and batch_clock.throttled:
                if current is not None:
                    _close(sampler, current, None)  # drained and thrown away with it: it ran in the same window
                sampler.forget_last()  # the next batch's gap would span the cool-down
                kept.throttled.append(
                    {
                        "after_samples": kept.pairs,
                        "why": batch_clock.why,
                        "next_discarded": bool(current),
                    }
                )
                if stopping:
                    break
                if (
                    len(kept.throttled) > settings.max_throttled_batches
                    or time.perf_counter() - started > settings.time_cap_s
                ):
                    stop_reason = "throttled"
                    break
                # Taken again once the slowdown has cleared; the reading that ends the cool-down opens the
                # next batch, so heat counted while idle is not charged to it.
                after, idle = monitor.cool_down(settings.cooldown_s)
                cooled += idle
                readings, pending = [after], None
                continue
            power_capped += bool(batch_clock and batch_clock.power_capped)
            clock = batch_clock.sm_clock_mhz if batch_clock else None
            kept.keep(sampler, pending, times, audit_ms, clock)
            kept_at_placement[pending.placement] += 1
            n = kept.pairs
            noise = kept.ratio_noise()
            if growing and judging_due(kept_at_placement, judged_count, judged_round):
                judged_count, judged_round = len(placements), min(kept_at_placement)
                wanted = placements_wanted(kept.samples, kept.placed, batch, len(placements), settings)
                if wanted and time.perf_counter() - started < settings.time_cap_s:
                    made = [{"reference": r, "candidate": c} for r, c in grow(wanted)]
                    placements += made
                    launched_at_placement += [0] * len(made)
                    kept_at_placement += [0] * len(made)
                    added += len(made)
                    if len(made) < wanted or len(placements) >= settings.max_placements:  # memory short, or the most
                        judged_count, growing = len(placements), False
            # Every placement sampled (``JUDGED_BATCHES`` times, where they are still to be judged), like both sides
            # audited, before the noise target may stop the sampling.
            covered = (not auditing or audited_enough(audit_counts(kept.audits, None))) and sampled_enough(
                kept_at_placement, judged_count
            )
            if stopping:
                pass  # a batch queued before the stop, kept
            elif enough(n, noise, covered, min(kept.side_ms.values()), settings):
                stop_reason, stopping = "noise_target", True
            elif time.perf_counter() - started > settings.time_cap_s and n >= min(settings.min_samples, 10) and covered:
                stop_reason, stopping = "time_cap", True
        pending = current
    if sampler.queues_ahead:  # its last batch waited for by its end event: work left on another stream ends here
        torch.cuda.synchronize(device)
    if not kept.pairs:
        raise GpuThrottled(
            f"no sample kept: the GPU was slowed in all {len(kept.throttled)} batches, {cooled:.1f} s of cool-down "
            f"between them did not help ({kept.throttled[-1]['why']})"
        )
    summaries = kept.summaries()
    ref, cand = summaries["reference"], summaries["candidate"]
    medians = {"reference": ref.median_ms, "candidate": cand.median_ms}
    gaps, top_up, recheck, fresh = judged_sync_gaps(
        kept.audits, kept.audit_chains, medians, sampler, placements, rng, lambda: batch_order(rng, batch)
    )
    wall = time.perf_counter() - started
    kept_clocks = [c for c in kept.clocks["reference"] if c is not None]
    spread, placement_noise = placement_spread(kept.samples, kept.placed, batch)
    timing = Timing(
        clock=sampler.clock,
        shape=shape,
        cache="cold" if sampler.flushes else "hot",
        reference=ref,
        candidate=cand,
        speedup=ref.median_ms / cand.median_ms if cand.median_ms > 0 else math.inf,
        ratio_noise=kept.ratio_noise(),
        measured_s=sum(kept.side_ms.values()) / 1000.0,
        wall_s=wall,
        stop_reason=stop_reason,
        sync=settings.sync if cuda else "host",
        graphs=graphs,
        clocks_watched="nvml" if monitor.available else monitor.why,
        flush_bytes=sampler.flush_bytes,
        turn_wait_s=round(waited, 6),
        sm_clock_mhz=statistics.median(kept_clocks) if kept_clocks else None,
        throttled_batches=len(kept.throttled),
        cooled_s=round(cooled, 3),
        power_capped_batches=power_capped,
        sync_gap_ms=gaps,
        audit_top_up=top_up,
        audit_recheck=recheck,
        window=[window_start, time.time()],
        placements=len(placements),
        placement_spread=spread,
        placement_noise=placement_noise,
        placements_added=added,
        batch_pairs=batch,
        sizing_rounds_ms=sizing,
        audit_samples=sum(len(values) for values in kept.audit_samples.values()),
        led_samples=kept.led_count if leads is not None else None,
        lead_ms={side: round(leads.lead_ms(side), 6) for side in sides} if leads is not None else None,
        waits_for_device=dict(leads.waits) if leads is not None else None,
        wait_probes_s=(
            {"before_turn": round(probed_before_turn, 6), "in_turn": round(sampler.probe_s - probed_before_turn, 6)}
            if leads is not None
            else None
        ),
        wait_probe_calls=dict(sampler.probe_calls) if leads is not None else None,
    )
    return timing, kept.raw(fresh)


# A turn that came this long after the warm-up (or longer than ``warmup_ms``) gets one more round of both sides
# before its samples: the shared work it waited for ran between (``Timing.turn_wait_s``).
REWARM_AFTER_S = 0.005


def _as_graph(fn, device: torch.device):
    """Capture one call of ``fn`` as a CUDA graph; the returned closure replays it."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as capture requires
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_output = fn()

    def replay():
        graph.replay()
        return static_output

    return replay


@dataclass
class Queued:
    """A batch on its way: its interleaved order, the side it audits, the sampler's handle on it, its placement,
    when it was launched (queued behind a batch still running: when that one ended) and when the
    synchronisation after it returned (epoch seconds; None until it is closed), the measuring thread's scheduler
    run delay at its launch and at its close (ns) and over its flight (ms; None where the system does not say), and
    the batches queued behind one another ahead of it since the device was last idle (0: it began on an idle device)."""

    order: list[str]
    audited: str | None
    handle: object
    placement: int = 0
    launched_at: float = 0.0
    closed_at: float | None = None
    ended_at: float | None = None  # where a batch queued behind it saw it end first (``CudaSampler.ahead_ended_at``)
    waited_at_launch: int | None = None
    waited_at_close: int | None = None
    chain: int = 0
    host_wait_ms: float | None = None


def _closed_before_the_next(sampler, queued: Queued) -> bool:
    """Whether ``queued`` is closed before the next batch is queued, not after: where it has an audit call (which must
    follow its samples, and whose synchronisation would wait for whatever came behind), or where the sampler runs each
    batch as it is launched (``queues_ahead``: the host clock)."""
    return queued.audited is not None or not sampler.queues_ahead


def _close(sampler, queued: Queued, placements: list[dict] | None) -> None:
    """Close ``queued`` (``placements``: with its audit call, if it has one; None: without, as one thrown away) and
    note when, and the host's wait over its flight."""
    audit = placements[queued.placement].get(queued.audited) if placements is not None else None
    sampler.close(queued.handle, audit)
    queued.closed_at, queued.waited_at_close = time.time(), waited_ns()
    if queued.waited_at_launch is not None and queued.waited_at_close is not None:
        queued.host_wait_ms = (queued.waited_at_close - queued.waited_at_launch) / 1e6
