"""What a measurement keeps of the batches it has judged and not thrown away: each side's samples (the batch's and the
audited call's), their clocks and sums, each batch's placement, audited side, window, span, gap before it, host CPU,
host wait and leads, the audits and their chains, the batches thrown away for a slowdown, and the raw record that
``samples.json`` holds. ``timing.measure_pair`` decides what is kept and when; this module only records it and reads
it back (the count, the noise of the median ratio, the two sides' summaries)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from runner.worker.host_cpu import current_cpu
from runner.worker.median_noise import ratio_noise, summarise
from runner.worker.protocol import SIDES, TimingSummary


def _per_side(factory=list) -> dict:
    return {side: factory() for side in SIDES}


@dataclass
class KeptBatches:
    """The kept batches' record, in the order they were kept."""

    samples: dict = field(default_factory=_per_side)  # each side's batch samples, in batch order (``batch`` a batch)
    # The audited calls kept as samples (``CudaSampler.close``), each side's apart, with their kept batch's index and
    # clock: the batches keep ``batch`` samples each, which the placements' spread and runner/analysis read.
    audit_samples: dict = field(default_factory=_per_side)
    audit_batches: dict = field(default_factory=_per_side)
    audit_clocks: dict = field(default_factory=_per_side)
    side_ms: dict = field(default_factory=lambda: dict.fromkeys(SIDES, 0.0))  # each side's samples, both kinds, summed
    # The same samples, both kinds, kept sorted as they come: the noise after each batch reads its quartiles off them
    # instead of sorting thousands of values again while the GPU waits for the next batch.
    ordered: dict = field(default_factory=_per_side)
    clocks: dict = field(default_factory=_per_side)
    order: list = field(default_factory=list)  # every kept sample's side, in the order they ran
    placed: list = field(default_factory=list)  # each kept batch's placement
    batch_audited: list = field(default_factory=list)  # each kept batch's audited side, None where it had no audit call
    # Each kept batch's [launched, closed], epoch seconds: when it ran (runner/analysis/disturbances.py); one queued
    # behind a batch still in flight from where that one ended, which ends that one's window.
    windows: list = field(default_factory=list)
    # Each kept batch's span, ms: its first sample's start to its last one's end (``runner.bench``'s turn parts).
    spans: list = field(default_factory=list)
    # Each kept batch's gap before it on the GPU's clock, ms: from the last end event of the batch launched before it
    # to its first start event (``CudaSampler.gap_before``; None on the host clock).
    gaps_before: list = field(default_factory=list)
    # The host CPU the measuring thread ran on as each kept batch was read (``host_cpu.py``).
    host_cpus: list = field(default_factory=list)
    # How long the measuring thread waited, runnable, for a core while each kept batch was in flight: from before its
    # launch (queued behind a batch still running: from that one's close) to after its close (ms; ``host_cpu.py``).
    host_waits: list = field(default_factory=list)
    # Each kept batch's samples that started behind a lead, by their position in its order, and its leads' sum, ms:
    # the GPU asleep ahead of them (``queue_lead.QueueLead``).
    led: list = field(default_factory=list)
    lead_ms: list = field(default_factory=list)
    led_count: dict = field(default_factory=lambda: dict.fromkeys(SIDES, 0))
    audits: dict = field(default_factory=_per_side)
    # Per audit, the batches queued behind one another ahead of its batch since the device was last idle (0: its batch
    # began on an idle device, after a synchronisation): the shape its call was made in (``sync_audits.sync_gaps``).
    audit_chains: dict = field(default_factory=_per_side)
    throttled: list = field(default_factory=list)  # the batches thrown away for a slowdown: when, why

    @property
    def pairs(self) -> int:
        """The pairs kept so far (each side's batch samples)."""
        return len(self.samples["reference"])

    def keep(self, sampler, batch, times: list[float], audit_ms: float | None, clock: float | None) -> None:
        """Record ``batch`` (a closed ``timing.Queued``): its samples ``times`` in its order, its audit (``audit_ms``:
        the synchronised call, None where it had none) and the audited call as a sample where the sampler has one,
        all at the SM clock ``clock``, and what the sampler says of its span, gap and leads."""
        for side, elapsed in zip(batch.order, times):
            self.samples[side].append(elapsed)
            bisect.insort(self.ordered[side], elapsed)
            self.clocks[side].append(clock)
            self.side_ms[side] += elapsed
        if audit_ms is not None:
            side = batch.audited
            self.audits[side].append(audit_ms)
            self.audit_chains[side].append(batch.chain)
            called_ms = sampler.audit_sample(batch.handle)
            if called_ms is not None:
                self.audit_samples[side].append(called_ms)
                self.audit_batches[side].append(len(self.placed))
                self.audit_clocks[side].append(clock)
                bisect.insort(self.ordered[side], called_ms)
                self.side_ms[side] += called_ms
        self.order.extend(batch.order)
        self.batch_audited.append(batch.audited if audit_ms is not None else None)
        self.placed.append(batch.placement)
        self.windows.append([batch.launched_at, batch.closed_at if batch.ended_at is None else batch.ended_at])
        self.spans.append(sampler.span(batch.handle))
        self.gaps_before.append(sampler.gap_before(batch.handle))
        self.host_cpus.append(current_cpu())
        self.host_waits.append(batch.host_wait_ms)
        positions, slept_ms = sampler.led(batch.handle)
        self.led.append(positions)
        self.lead_ms.append(round(slept_ms, 6))
        for position in positions:
            self.led_count[batch.order[position]] += 1

    def ratio_noise(self) -> float:
        """The relative noise of the median ratio over every kept sample, both kinds."""
        return ratio_noise(self.ordered["reference"], self.ordered["candidate"], presorted=True)

    def summaries(self) -> dict[str, TimingSummary]:
        """Each side's summary over its batch samples and its audited calls."""
        return {side: summarise(self.samples[side] + self.audit_samples[side]) for side in SIDES}

    def raw(self, fresh: dict) -> dict:
        """The raw record (``samples.json``), with the audits taken after the last batch (``fresh``, from
        ``sync_audits.judged_sync_gaps``)."""
        return {
            "unit": "ms",
            "order": self.order,
            **self.samples,
            "sm_clock_mhz": self.clocks,
            "batch_placement": self.placed,
            "batch_audited": self.batch_audited,
            "batch_window": self.windows,
            "batch_span_ms": self.spans,
            "batch_gap_before_ms": self.gaps_before,
            "batch_host_cpu": self.host_cpus,
            "batch_host_wait_ms": self.host_waits,
            "batch_led": self.led,
            "batch_lead_ms": self.lead_ms,
            "sync_audit": self.audits,
            "sync_audit_chain": self.audit_chains,
            "audit_samples": self.audit_samples,
            "audit_sample_batch": self.audit_batches,
            "audit_sample_clock_mhz": self.audit_clocks,
            "sync_audit_top_up": fresh["top_up"],
            "sync_audit_top_up_chain": fresh["top_up_chain"],
            "sync_audit_recheck": fresh["recheck"],
            "sync_audit_recheck_chain": fresh["recheck_chain"],
            "throttled_batches": self.throttled,
        }
