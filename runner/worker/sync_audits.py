"""The sync audits' judgement: whether a measurement's audited calls show work its events did not time.

An audit is one call of a side, closed by a device-wide synchronisation (``CudaSampler.close``); its time less the
median of that side's samples is the side's sync gap, and the candidate's gap beyond the reference's is judged in
``integrity.unjoined_work``. The timing loop (``timing.py``) takes the audits and records, per audit, the batches queued
behind one another ahead of its batch since the device was last idle (its chain: 0 right after a synchronisation).
This module owns what follows the last batch: each side's gap from its two shapes of audit judged apart
(``sync_gaps``), and, where the measured audits would flag the candidate, the fresh audits taken before the turn ends:
a top-up of the shapes that hold fewer than ``MIN_AUDITS`` audits, then, where they still would, a recheck of
``RECHECK_AUDITS`` per side in each shape (``judged_sync_gaps``). It never keeps a sample: the fresh audits' batches
are thrown away.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from runner.worker.integrity import unjoined_work
from runner.worker.protocol import SIDES

# Audit calls kept per side before the noise target may stop the sampling: the gap is judged on their median.
MIN_AUDITS = 3


# Audits per side taken again where the measurement's own would flag unjoined work: the gap judged is their median.
RECHECK_AUDITS = 5


# The longest chain of unaudited batches a recheck queues ahead of an audited one (``judged_sync_gaps``).
RECHECK_CHAIN_MAX = 4


def judged_sync_gaps(
    audits: dict,
    chains: dict,
    medians: dict,
    sampler,
    placements: list[dict],
    rng: random.Random,
    draw_order: Callable[[], list[str]],
) -> tuple[dict, dict | None, dict | None, dict]:
    """The sync gaps to judge (``Timing.sync_gap_ms``), the top-up's record (``Timing.audit_top_up``), the recheck's
    (``Timing.audit_recheck``), and the fresh audits' times and chains per side and kind (``samples.json``'s
    ``sync_audit_top_up``, ``sync_audit_recheck`` and their ``_chain``s). The measurement's own gaps where they show
    no unjoined work (no audits: none shown). Where they show some and a shape of a side holds fewer than
    ``MIN_AUDITS`` audits (``thin_shapes``: one disturbed audit is then its median), fresh audits first bring every
    such shape up to ``MIN_AUDITS``, and the measured and fresh ones of each shape are judged together; where those
    still show work, or no shape was thin, ``RECHECK_AUDITS`` fresh audits of each side in each shape the
    measurement's were made in are judged alone, against the same sample ``medians`` (by side). ``chains``: per audit,
    the batches queued ahead of its batch since the device was last idle (``sync_gaps``).

    ``rng``: the measurement's generator (each recheck shape's first side); ``draw_order``: a batch's interleaved order
    as the measurement draws it (``stopping.batch_order`` from the same generator).

    The fresh audits close batches made as the measurement's are (``_fresh_audits``), whose samples are not kept: a
    candidate cannot tell them from the batches it was measured in. A recheck of a shape of its own would let it:
    batches of one call each, right after a device-wide synchronisation, passed a candidate that ran honestly for its
    first two calls after every synchronisation and hid work in the rest (a reviewer's host model of it). The measured
    batches come in two shapes, and so do the fresh ones: where the sampler queues ahead, an audited batch follows
    either a synchronisation (after another audited batch) or a chain of unaudited batches queued behind one another,
    the device never idle; the fresh audits are taken both ways, the chain as long as the measurement's behind its
    audits (their median, at most ``RECHECK_CHAIN_MAX``), and each shape is judged on its own, the larger gap counting:
    a candidate honest for as many calls after the device was idle as a batch holds, hiding work after that, would
    show its work in the audits behind a chain alone, and a recheck after synchronisations alone would clear it.

    The audits after the measurement's first few batches are a quarter of the rest (``audit_share``), most behind a
    chain, so a side's chained shape often holds one or two: judged alone, one audit slowed by another process's
    work flags the measurement. On the H200 4 of 568 candidate audits (0.7%) were slowed that far by themselves
    (torch_compile, a quarter of the suite, both passes; BENCHMARKS.md, sixty-second session), and a recheck takes
    ``2 * RECHECK_AUDITS`` audited batches per shape, each behind its chain. The top-up takes at most
    ``MIN_AUDITS - 1`` per thin shape."""
    empty = {side: [] for side in SIDES}
    gaps = sync_gaps(audits, chains, medians)
    suspicion = unjoined_work(gaps, medians["candidate"])
    if suspicion is None:
        return gaps, None, None, {"top_up": empty, "top_up_chain": empty, "recheck": empty, "recheck_chain": empty}
    fillers = _filler_chain(chains)
    started = time.perf_counter()
    thin = thin_shapes(chains)
    plan = [(side, fillers if behind else 0) for side, behind, missing in thin for _ in range(missing)]
    topped, topped_chains = _fresh_audits(plan, sampler, placements, draw_order)
    top_up = None
    if plan:
        top_up = {
            "why": suspicion,
            "first_gap_ms": gaps,
            "audits": {side: len(topped[side]) for side in SIDES},
            "chain": fillers,
            "seconds": round(time.perf_counter() - started, 6),
        }
        merged = {side: audits[side] + topped[side] for side in SIDES}
        merged_chains = {side: chains[side] + topped_chains[side] for side in SIDES}
        gaps = sync_gaps(merged, merged_chains, medians)
        suspicion = unjoined_work(gaps, medians["candidate"])
    fresh = {"top_up": topped, "top_up_chain": topped_chains, "recheck": empty, "recheck_chain": empty}
    if suspicion is None:
        return gaps, top_up, None, fresh
    started = time.perf_counter()
    plan = []
    for chain in sorted({0, fillers} if sampler.queues_ahead else {0}):
        first = rng.randrange(2)
        plan += [(SIDES[(first + k) % 2], chain) for k in range(2 * RECHECK_AUDITS)]
    rechecked, rechecked_chains = _fresh_audits(plan, sampler, placements, draw_order)
    recheck = {
        "why": suspicion,
        "first_gap_ms": gaps,
        "audits_per_side": RECHECK_AUDITS,
        "chain": fillers if sampler.queues_ahead else None,
        "seconds": round(time.perf_counter() - started, 6),
    }
    fresh.update(recheck=rechecked, recheck_chain=rechecked_chains)
    return sync_gaps(rechecked, rechecked_chains, medians), top_up, recheck, fresh


def _filler_chain(chains: dict) -> int:
    """How many unaudited batches a fresh audit behind a chain is queued behind: as many as the measured audits behind
    one were (their median, at least 1, at most ``RECHECK_CHAIN_MAX``); 0 where none was."""
    behind = [chain for side in SIDES for chain in chains[side] if chain > 0]
    return min(RECHECK_CHAIN_MAX, max(1, round(statistics.median(behind)))) if behind else 0


def thin_shapes(chains: dict) -> list[tuple[str, bool, int]]:
    """Each side's shapes (after a synchronisation, ``False``; behind a chain, ``True``) that hold at least one audit
    and fewer than ``MIN_AUDITS``, with the audits they lack."""
    thin = []
    for side in SIDES:
        for behind in (False, True):
            held = sum((chain > 0) == behind for chain in chains[side])
            if 0 < held < MIN_AUDITS:
                thin.append((side, behind, MIN_AUDITS - held))
    return thin


def _fresh_audits(
    plan: list[tuple[str, int]], sampler, placements: list[dict], draw_order: Callable[[], list[str]]
) -> tuple[dict, dict]:
    """One fresh audit per ``(side, chain)`` of ``plan``, in its order: ``chain`` unaudited batches each queued behind
    the last, then the audited one behind them (``chain`` 0: right after a synchronisation), every batch in an order
    ``draw_order`` draws, the placements in turn per side; none of their samples kept. Returns each
    side's audit times and the chains they were taken behind (0 where the audited batch found the device idle)."""
    times = {side: [] for side in SIDES}
    chains = {side: [] for side in SIDES}
    for audited, chain in plan:
        calls = placements[len(times[audited]) % len(placements)]  # each side at every placement in turn
        ahead = None
        for _ in range(chain + 1):  # ``chain`` unaudited batches, then the audited one, each behind the last
            order = draw_order()
            handle = sampler.launch([calls[side] for side in order], order)
            if ahead is not None:
                sampler.close(ahead)
            ahead = handle
        sampler.close(handle, calls[audited])
        times[audited].append(sampler.times(handle)[1])
        chains[audited].append(chain if sampler.queued_behind(handle) else 0)
    return times, chains


def sync_gaps(audits: dict, chains: dict, medians: dict) -> dict:
    """Each audited side's sync gap, in ms: its median audit minus the median of its samples (``medians``, by side),
    for its audits that followed a synchronisation (chain 0) and for those behind a chain of batches apart (``chains``:
    per audit, the batches queued ahead of its batch since the device was last idle), the larger of the two."""
    gaps = {}
    for side in SIDES:
        shapes = [
            [audit for audit, chain in zip(audits[side], chains[side]) if (chain > 0) == behind]
            for behind in (False, True)
        ]
        medians_by_shape = [statistics.median(shape) for shape in shapes if shape]
        if medians_by_shape:
            gaps[side] = max(medians_by_shape) - medians[side]
    return gaps
