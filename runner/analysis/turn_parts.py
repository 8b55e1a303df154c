"""Where the measurements' turns went, from each evaluation's ``samples.json``: the kept samples, the audit calls, the
batches' rest (between the samples and around the batches), the leads, the GPU's gaps between batches, the audits
taken again, the batches shorter than asked."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from runner.analysis.between_turns import SLOWEST_SHOWN
from runner.analysis.records import samples_path
from runner.worker.device_token import EXCLUSIVE, token_windows


def turn_parts(sampled: list) -> dict | None:
    """Where the measurements' turns went, summed over the evaluations, in parts that add up to their exclusive
    windows: the kept samples (what ``measured`` counts: the batches' and the audited calls kept as samples), the
    rest of the audit calls (one call of a side closed by a device-wide synchronisation, ``timing.py``: the
    synchronisation, and the whole call where it was not kept), from the turn's start to its first batch (a round
    taken again after the hand-over), after its last batch (the audits' judgement, the result), and the rest of the
    batches (the L2 flush before every sample, events, the batches' own gaps and the ones taken again). From each
    evaluation's ``samples.json``; None where none has one (f51 on the H100: samples 277.4 s of 295.5, audits 4.0 s,
    before the first batch 1.4 s, after the last 0.8 s: BENCHMARKS.md, twenty-fifth session). ``sampled``: from
    ``turns_sampled``."""
    parts = dict.fromkeys(("samples", "audits", "before_first_batch", "after_last_batch", "batches_rest"), 0.0)
    seen = False
    for (start, end), raw, batched, audit_calls, audit_samples, _ in sampled:
        seen = True
        batches = raw["batch_window"]
        first, last = min(b[0] for b in batches), max(b[1] for b in batches)
        parts["samples"] += batched + audit_samples
        parts["audits"] += audit_calls - audit_samples
        parts["before_first_batch"] += first - start
        parts["after_last_batch"] += end - last
        parts["batches_rest"] += (last - first) - batched - audit_calls
    return parts if seen else None


def batches_rest_parts(sampled: list) -> dict | None:
    """``turn_parts``'s ``batches_rest`` in two parts that add up to it, from each kept batch's span (its first
    sample's start to its last one's end on the sampler's clock, ``batch_span_ms`` in ``samples.json``): between
    the samples inside the batches (on a GPU the L2 flushes after each batch's first, the events, any wait for the
    host's launches) and around them (each batch's first flush and any lead, its audit's flush and synchronisation,
    and where a batch began on an idle device, after an audit's synchronisation or where the host fell behind, the
    host's work before its first sample; before the sixty-first session every batch was closed by a synchronisation
    before the next was queued). None where no samples file has the
    spans (runs from before the twenty-eighth session). ``sampled``: from ``turns_sampled``."""
    parts = {"between_samples": 0.0, "around_batches": 0.0}
    seen = False
    for _, raw, batched, audit_calls, _, _ in sampled:
        if raw.get("batch_span_ms") is None:
            continue
        seen = True
        parts["between_samples"] += sum(raw["batch_span_ms"]) / 1000.0 - batched
        parts["around_batches"] += _around_batches(raw, audit_calls)
    return parts if seen else None


def lead_seconds(sampled: list) -> float | None:
    """Seconds the GPU slept ahead of the samples that found its queue short (``batch_lead_ms`` in ``samples.json``,
    ``queue_lead.QueueLead``), all turns together: part of ``batches_rest``, between the samples or before a batch's
    first. None where no samples file records them (runs from before the fifty-eighth session). ``sampled``: from
    ``turns_sampled``."""
    leads = [sum(raw["batch_lead_ms"]) for _, raw, *_ in sampled if raw.get("batch_lead_ms") is not None]
    return sum(leads) / 1000.0 if leads else None


def gpu_between_batches(sampled: list) -> dict | None:
    """The GPU's own gaps between the batches of each turn, from a batch's last end event to the next one's first start
    event (``batch_gap_before_ms`` in ``samples.json``, ``CudaSampler.gap_before``; each turn's first batch's, which
    reaches back before the turn, and any unread, left out), all turns together: how many, their sum (s) and median
    (ms). Each holds the next batch's first flush and any lead, and after an audited batch its audit call: what
    ``batches_rest_parts``' ``around_batches`` holds, with the audit calls, which that leaves out. None where no
    samples file records a gap (runs from before the sixty-first session, or on the host clock). ``sampled``: from
    ``turns_sampled``."""
    gaps = [gap for _, raw, *_ in sampled for gap in (raw.get("batch_gap_before_ms") or [])[1:] if gap is not None]
    if not gaps:
        return None
    return {"batches": len(gaps), "sum_s": sum(gaps) / 1000.0, "median_ms": statistics.median(gaps)}


def audits_taken_again(results) -> dict:
    """The evaluations whose measurement's sync audits would have flagged unjoined work, so that fresh audits were
    taken in the turn after the last batch (``Timing.audit_top_up``: a shape's few audits brought up to three;
    ``Timing.audit_recheck``: five per side in each shape judged instead), how many of each, and the seconds they
    took, together (part of ``turn_parts``' ``after_last_batch``; none recorded before the sixty-second session's
    top-up)."""
    timings = [result.timing for _, result in results if result.timing]
    topped = [t.audit_top_up for t in timings if t.audit_top_up]
    rechecked = [t.audit_recheck for t in timings if t.audit_recheck]
    return {
        "topped_up": len(topped),
        "rechecked": len(rechecked),
        "seconds": sum(float(record.get("seconds") or 0.0) for record in topped + rechecked),
    }


def wait_probes(results) -> dict | None:
    """The seconds the measurements spent probing sides for a wait inside their calls (``Timing.wait_probes_s``), all
    evaluations together: before their turns (in a short warm-up's second launch, part of the hand-overs) and in them
    (the turn's first launch after a warm-up of one round, or a later one: part of ``turn_parts``' ``before_first_batch``
    or ``batches_rest``), how many evaluations probed any side, and per side probed (``Timing.wait_probe_calls``) how
    many a call of their own settled and how many tries the rest took. None where no result records them (runs from
    before the sixty-sixth session, or without leads)."""
    records = [result.timing.wait_probes_s for _, result in results if result.timing and result.timing.wait_probes_s]
    if not records:
        return None
    sides = [
        side
        for _, result in results
        if result.timing and result.timing.wait_probe_calls
        for side in result.timing.wait_probe_calls.values()
    ]
    return {
        "before_turn": sum(record["before_turn"] for record in records),
        "in_turn": sum(record["in_turn"] for record in records),
        "evaluations": sum(record["before_turn"] + record["in_turn"] > 0 for record in records),
        # Sides probed, those a call of their own settled with no try, and the tries (None before the sixty-seventh
        # session, whose results do not say).
        "sides": len(sides) if sides else None,
        "settled_by_one_call": sum(side["tries"] == 0 for side in sides) if sides else None,
        "tries": sum(side["tries"] for side in sides) if sides else None,
    }


def _around_batches(raw: dict, audit_calls: float) -> float:
    """Seconds of a turn's batches (first launched to last closed) outside their spans and audit calls: the GPU
    waiting around them. ``raw``: a ``samples.json`` with ``batch_span_ms``."""
    batches = raw["batch_window"]
    first, last = min(b[0] for b in batches), max(b[1] for b in batches)
    return (last - first) - sum(raw["batch_span_ms"]) / 1000.0 - audit_calls


def short_batches(sampled: list) -> dict | None:
    """The evaluations whose kept batches lasted less than their ``batch_min_ms`` (the median of their spans), by
    pairs per batch, and how long the GPU waited around their batches (``batches_rest_parts``' ``around_batches``).
    A batch of ``batch`` pairs among them was sized by a warm-up round that took longer than the calls do (b8, H200,
    torch_compile, forty-third session: 45 of 111 under 50 ms, all of 20 pairs, 2.4 s of the 3.2 s around all
    batches); one of the most pairs (``stopping.batch_pairs``) holds calls too short for any batch to last that long.
    Each of the shortest lists the rounds that sized its batches (``timing.sizing_rounds_ms``; none before the
    forty-fourth session). In that session's pass b (H200), with the round in the turn, 17 evaluations were still
    under 50 ms, 11 of them at 20 pairs of calls under 1 ms, which only rounds of 2.5 ms or more give. None where no
    job asked for a least batch."""
    counted, by_pairs, around, shortest = 0, {}, 0.0, []
    for _, raw, _, audit_calls, _, (job, result) in sampled:
        least = float(job.get("timing", {}).get("batch_min_ms") or 0.0)
        if least <= 0 or not raw.get("batch_span_ms") or result.timing is None:
            continue
        counted += 1
        span = statistics.median(raw["batch_span_ms"])
        if span >= least:
            continue
        pairs = result.timing.batch_pairs
        by_pairs[pairs] = by_pairs.get(pairs, 0) + 1
        around += _around_batches(raw, audit_calls)
        shortest.append(
            {
                "task": result.task_id,
                "median_span_ms": span,
                "batch_pairs": pairs,
                "sizing_rounds_ms": result.timing.sizing_rounds_ms,
            }
        )
    if not counted:
        return None
    shortest.sort(key=lambda entry: entry["median_span_ms"])
    return {
        "evaluations": sum(by_pairs.values()),
        "of": counted,
        "by_batch_pairs": dict(sorted(by_pairs.items())),
        "around_batches_s": around,
        "shortest": shortest[:SLOWEST_SHOWN],
    }


def turns_sampled(run_dir: Path, results):
    """Per evaluation measured in one turn whose ``samples.json`` has its batches: the turn (start, end), the raw
    samples, the seconds of its batches' kept samples, of its audit calls (each from its start event to the
    end event after its synchronisation) and of the audited calls kept as samples (none before the thirty-first
    session), which lie inside the audit calls; and its job and result (``job_results``)."""
    for job, result in results:
        record = result.environment.get("device_token", {})
        turns = [(start, end) for start, end, mode in token_windows(record) if mode == EXCLUSIVE]
        path = samples_path(run_dir, result.eval_id)
        if len(turns) != 1 or not path.exists():
            continue
        raw = json.loads(path.read_text())
        if not raw.get("batch_window"):
            continue
        batched = (sum(raw["reference"]) + sum(raw["candidate"])) / 1000.0
        audit_calls = sum(sum(times) for times in raw.get("sync_audit", {}).values()) / 1000.0
        audit_samples = sum(sum(times) for times in raw.get("audit_samples", {}).values()) / 1000.0
        yield turns[0], raw, batched, audit_calls, audit_samples, (job, result)
