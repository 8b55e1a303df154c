"""How a measurement's placements are judged: each one's speedup batch by batch, how far apart they lie, whether
more are wanted, and when each has been sampled enough for the noise target to stop the sampling (or for them to
be judged). The timing loop (``timing.py``) asks and samples; ``placements.PlacementMaker`` makes the placements;
this module reads samples and decides nothing else.

Where a task's placements matter, two runs of four placements each differ by what four draws of them differ by: a
1 GiB transpose compiled by torch.compile on an H200 took 64 placements at speedups 0.83% apart (standard
deviation), which leaves two passes of four placements 1.2% apart at their 95th percentile, of sixteen 0.42%
(BENCHMARKS.md, thirty-fifth session). More samples of the same placements would not narrow that; more placements do.

They are judged again at each round of batches after the first judgement while they call for none: a run's first
turn on the H100 came in two speeds for its first 2.3-2.6 s, its batches' noise 5-9% where it was 0.03-0.09% after,
so in three of six runs the judge, asked only at three batches each, found its transpose's placements within that
noise (F 0.6-2.3) and left them at four (placement noise up to 1.50%); asked at each round, the same batches called
for more once the stretch had passed, at 20, 32 and 20 batches of their 36-43 (BENCHMARKS.md, seventy-ninth session).
Judged at each of rounds 3-12, four placements of one speed grew for nothing in 0.15% of simulated measurements whose
batches' noise was 0.3% (as once at three batches), in 7.5% at 1-3% noise (1.0-1.2% once).
"""

from __future__ import annotations

import math
import statistics

from runner.worker.protocol import SIDES, TimingSettings, batch_medians

# Placements are judged once each has this many kept batches (``placements_wanted``), and the sampling waits for it;
# then again at each round after (``judging_due``).
JUDGED_BATCHES = 3
# The placements' speedups must vary this many times more than their batches' noise within each placement
# explains (an analysis of variance's F, on medians) before more are made: where the placements do not matter
# (normal noise, simulated), 1.5% of four placements of three batches each made more for nothing. Without it a
# torch_compile quarter suite on an H200 grew five and six of 56 tasks' placements, half of them to a placement noise
# of 0.02-0.04% (BENCHMARKS.md, thirty-fifth session).
PLACEMENTS_F_MIN = 8.0


def judging_due(kept_at_placement: list[int], judged_count: int, judged_round: int) -> bool:
    """Whether the placements are to be judged now: once each has ``JUDGED_BATCHES`` kept batches, for each new count
    of them (``judged_count``: the count last judged), and again once each has a batch more than the fewest at the
    last judgement (``judged_round``)."""
    least = min(kept_at_placement)
    return least >= JUDGED_BATCHES and (judged_count < len(kept_at_placement) or least > judged_round)


def sampled_enough(kept_at_placement: list[int], judged_count: int) -> bool:
    """Whether every placement has a kept batch, and ``JUDGED_BATCHES`` where they are still to be judged
    (``judged_count``: the count of placements last judged)."""
    return min(kept_at_placement) >= (1 if judged_count >= len(kept_at_placement) else JUDGED_BATCHES)


def sampled_enough_after(kept_at_placement: list[int], placement: int, judged_count: int) -> bool:
    """``sampled_enough`` once a batch queued at ``placement`` is kept too."""
    after = list(kept_at_placement)
    after[placement] += 1
    return sampled_enough(after, judged_count)


def placements_wanted(samples: dict, placed: list[int], batch: int, count: int, settings: TimingSettings) -> int:
    """How many placements to make beside the ``count`` sampled: as many again (up to ``max_placements``) where
    their speedups differ beyond their batches' own noise (``PLACEMENTS_F_MIN``) by enough that the error it leaves
    on their mean is over ``target_noise``; else none. Each batch's speedup is its reference median over its
    candidate median, taken as a logarithm (relative differences). A placement's speedup is the median of its
    batches'; the batches' noise is their spread about their placement's (the median absolute deviation, pooled,
    without the zero of each odd group's middle batch), so one disturbed batch neither hides the placements' effect
    nor makes one (a stretch of them can hide it: ``judging_due`` asks again). The placements' own variance is their
    speedups' variance less what that noise puts into a median of their batches, and the error is its root over the
    count. None where a placement has fewer than two batches (the loop asks at ``JUDGED_BATCHES`` and after:
    ``judging_due``)."""
    by_placement = batch_speedups(samples, placed, batch)
    groups = [[math.log(value) for value in values] for values in by_placement.values()]
    if len(groups) < max(count, 2) or min(len(values) for values in groups) < 2:
        return 0
    centres = [statistics.median(values) for values in groups]
    deviations = []
    for values, centre in zip(groups, centres):
        spread = sorted(abs(value - centre) for value in values)
        deviations += spread[1:] if len(values) % 2 else spread
    noise = 1.4826 * statistics.median(deviations)  # a normal standard deviation's estimate
    explained = noise**2 * math.pi / 2 * statistics.fmean(1 / len(values) for values in groups)
    between = statistics.variance(centres)
    if between <= explained * PLACEMENTS_F_MIN or math.sqrt((between - explained) / count) <= settings.target_noise:
        return 0
    return max(0, min(count, settings.max_placements - count))


def batch_speedups(samples: dict, placed: list[int], batch: int) -> dict[int, list[float]]:
    """Each placement's batches' speedups (a batch's reference median over its candidate median), in batch order;
    batches with a median of zero left out."""
    by_placement: dict[int, list[float]] = {}
    medians = zip(*(batch_medians(samples[side], batch, len(placed)) for side in SIDES))
    for placement, (reference, candidate) in zip(placed, medians):
        if candidate > 0 and reference > 0:
            by_placement.setdefault(placement, []).append(reference / candidate)
    return by_placement


def placement_spread(samples: dict, placed: list[int], batch: int) -> tuple[float | None, float | None]:
    """How far the placements' speedups lie apart: the largest over the smallest minus 1, and the standard
    error of their mean relative to it; None with fewer than two placements. A placement's speedup is the
    median of its batches' speedups (each batch's reference median over its candidate median), so a batch
    that something slowed on both sides counts as one batch, not as a shift of every median; whatever
    moves whole batches still shows in it, so it bounds the placements' own effect from above."""
    by_placement = batch_speedups(samples, placed, batch)
    speedups = [statistics.median(values) for values in by_placement.values()]
    if len(speedups) < 2:
        return None, None
    mean = statistics.fmean(speedups)
    return max(speedups) / min(speedups) - 1, statistics.stdev(speedups) / math.sqrt(len(speedups)) / mean
