"""Order effects in a run's samples: which sides took longer behind the other side's samples than behind their own.

``python -m runner.bench paced RUN_DIR``. A sample's events time the host's launches too where less work is queued
ahead of it than its call takes the host to queue (``queue_lead.QueueLead``). The timing loop interleaves the two sides,
so each side's samples come behind one of its own or one of the other side's, led or not (``batch_led`` in
``samples.json``). Per evaluation and side, the samples are grouped so, each batch's first apart (it follows a
synchronisation); the side's queued pace is the least of the medians of its led samples and of its unled ones behind
its own side, and a side is paced where its unled samples behind the other side take ``PACED_EXCESS`` or more longer.
In a cold torch_compile pass on the H200 sort_moe_expert_ids_stable_int32's candidate took 0.330 ms behind a reference
sample against 0.228 led, 45% more; cholesky's took 3.729 ms behind a reference that had synchronised against 3.682
led: the host's launches in them. Not every such excess is the host's: label_smoothed_cross_entropy_fp32's eager
reference took 1.166 ms behind the candidate's 0.48 ms samples and 1.104 behind its own, 5.5% more in both passes,
though its host queues a call in 0.14 ms (BENCHMARKS.md, fifty-ninth session). Each paced side's row has its lead at
the end (``timing.lead_ms``: its host time to queue a call, at most its GPU time) and the other side's median, to
tell the two apart, and whether the side was found to wait for the device inside its calls (``timing.waits_for_device``:
such a side is led only by what its call leaves running after it returns, none where it waits at its end; None where it
was not probed). torch_compile's batched_solve_small_fp32, which waits partway and was not led, took 4.04 ms behind the
eager reference and 3.81 behind its own side on the H100 (seventy-fourth session): its host's launches before its
wait; led by what its call leaves running, 3.509 and 3.510 (seventy-fifth). A group of fewer than ``MIN_SAMPLES``
samples is not judged.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from runner.analysis.records import job_results, samples_path
from runner.worker.protocol import SIDES

PACED_EXCESS = 0.01
MIN_SAMPLES = 8
_LISTED = 20


def sample_groups(raw: dict) -> dict[str, dict[str, list[float]]] | None:
    """Per side, its samples by where they stood: ``first`` in a batch, ``led``, or unled ``behind_own`` or
    ``behind_other`` side; None where the file does not say which were led (runs from before the fifty-eighth
    session) or its batches are not of one size."""
    led, order = raw.get("batch_led"), raw.get("order") or []
    if led is None or not led or len(order) % len(led):
        return None
    size = len(order) // len(led)
    taken = dict.fromkeys(SIDES, 0)
    groups = {side: {"first": [], "led": [], "behind_own": [], "behind_other": []} for side in SIDES}
    for batch, positions in enumerate(led):
        positions = set(positions)
        for position in range(size):
            side = order[batch * size + position]
            value = raw[side][taken[side]]
            taken[side] += 1
            if position == 0:
                group = "first"
            elif position in positions:
                group = "led"
            elif order[batch * size + position - 1] == side:
                group = "behind_own"
            else:
                group = "behind_other"
            groups[side][group].append(value)
    return groups


def side_pace(groups: dict[str, list[float]]) -> dict | None:
    """One side's groups' medians (ms) and sizes, and its excess behind the other side over its queued pace, in
    percent; None where its unled samples behind the other side, or both of the groups its pace is read from, number
    fewer than ``MIN_SAMPLES``."""
    medians = {name: statistics.median(values) for name, values in groups.items() if len(values) >= MIN_SAMPLES}
    queued = [medians[name] for name in ("led", "behind_own") if name in medians]
    if "behind_other" not in medians or not queued:
        return None
    return {
        "median_ms": medians,
        "samples": {name: len(values) for name, values in groups.items()},
        "queued_ms": min(queued),
        "excess_pct": 100 * (medians["behind_other"] / min(queued) - 1),
    }


def host_pace(run_dir: Path) -> dict:
    """The run's sides checked, those paced (``PACED_EXCESS`` or more behind the other side), the largest listed,
    and the share of all samples led."""
    checked, unreadable, samples, led_samples, paced = 0, 0, 0, 0, []
    for _, result in job_results(run_dir):
        path = samples_path(run_dir, result.eval_id)
        if not result.timing or not path.exists():
            continue
        groups = sample_groups(json.loads(path.read_text()))
        if groups is None:
            unreadable += 1
            continue
        for side in SIDES:
            samples += sum(len(values) for values in groups[side].values())
            led_samples += len(groups[side]["led"])
            pace = side_pace(groups[side])
            if pace is None:
                continue
            checked += 1
            if pace["excess_pct"] >= 100 * PACED_EXCESS:
                other = getattr(result.timing, SIDES[1 - SIDES.index(side)])
                lead = (result.timing.lead_ms or {}).get(side)
                waits = (result.timing.waits_for_device or {}).get(side)
                row = {"task": result.task_id, "eval_id": result.eval_id, "side": side, **pace}
                paced.append(
                    {**row, "lead_ms": lead, "waits_for_device": waits, "other_side_median_ms": other.median_ms}
                )
    paced.sort(key=lambda row: -row["excess_pct"])
    return {
        "run": str(run_dir),
        "sides_checked": checked,
        "evaluations_unreadable": unreadable,
        "paced": len(paced),
        "paced_excess_pct": 100 * PACED_EXCESS,
        "led_pct": 100 * led_samples / samples if samples else None,
        "largest": paced[:_LISTED],
    }
