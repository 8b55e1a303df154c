"""How many pairs a batch holds and when the sampling stops: the batches' size from the warm-up's pair of calls
(``batch_pairs``), a batch's interleaved order, and the noise target's stopping rule, for the samples judged so far
(``enough``) and for those with the batch still queued (``likely_enough``). Used by ``timing.measure_pair``."""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING

from runner.worker.protocol import SIDES, TimingSettings
from runner.worker.sync_audits import MIN_AUDITS

if TYPE_CHECKING:
    from runner.worker.timing import Queued


# The most times ``TimingSettings.batch`` a batch holds, however short its calls (1,280 pairs at the default 20).
MAX_BATCH_DOUBLINGS = 6
# A measurement stopped by ``max_samples`` still has this many batches: room for the audits of both sides
# (``MIN_AUDITS`` each, one a batch) and a batch at each placement, and for judging the batches apart.
MIN_BATCHES_AT_CAP = 20


def batch_pairs(settings: TimingSettings, pair_ms: float) -> int:
    """The pairs in each batch of a measurement whose pair of calls took ``pair_ms`` in the warm-up: ``batch``
    times the least power of two (up to ``2 ** MAX_BATCH_DOUBLINGS``, and no more than ``max_samples`` over
    ``MIN_BATCHES_AT_CAP``) for which they take ``batch_min_ms``. Powers of two, so the warm-up's jitter seldom
    changes a rerun's batches (and its order of samples, drawn per batch)."""
    pairs = settings.batch
    most = max(settings.batch, settings.max_samples // MIN_BATCHES_AT_CAP)
    for _ in range(MAX_BATCH_DOUBLINGS):
        if pairs * pair_ms >= settings.batch_min_ms or pairs * 2 > most:
            break
        pairs *= 2
    return pairs


def sized_short(settings: TimingSettings, pair_ms: float) -> bool:
    """Whether a pair of calls shorter than ``pair_ms`` would be sampled in longer batches (``batch_pairs``): a warm-up
    beside other evaluations' shared work timed their time slices too: batches of 20 pairs of 0.66 ms calls, 15 ms,
    where ``batch_min_ms`` asked for 50 (45 of 111 evaluations' batches under 50 ms, all of 20 pairs, in a
    torch_compile pass on the H200; ``runner.bench duty``'s ``short_batches``). A batch that short leaves the GPU
    waiting for the host, whose every delay then lies in the samples (BENCHMARKS.md, forty-third session)."""
    return settings.batch_min_ms > 0 and batch_pairs(settings, pair_ms) < batch_pairs(settings, 0.0)


def batch_order(rng: random.Random, batch: int) -> list[str]:
    """A batch's interleaved order: ``batch`` pairs, each side once per pair, in the order ``rng`` draws."""
    order = []
    for _ in range(batch):
        pair = list(SIDES)
        rng.shuffle(pair)
        order.extend(pair)
    return order


def audit_counts(audits: dict, queued: Queued | None) -> dict:
    """Each side's audits: those kept, and the one of the batch ``queued`` (not judged yet), if any."""
    return {side: len(values) + (queued is not None and queued.audited == side) for side, values in audits.items()}


def audited_enough(counts: dict) -> bool:
    """Whether each side has ``MIN_AUDITS`` audits (``audit_counts``)."""
    return all(count >= MIN_AUDITS for count in counts.values())


def enough(n: int, noise: float, covered: bool, shortest_side_ms: float, settings: TimingSettings) -> bool:
    """The noise target's stopping rule: enough samples, quiet enough, both sides audited and every placement
    sampled (``covered``), long enough."""
    return (
        n >= settings.min_samples
        and noise <= settings.target_noise
        and covered
        and shortest_side_ms >= 1000.0 * settings.min_time_s
    )


def likely_enough(
    side_ms: dict,
    n: int,
    noise: float,
    audits: dict,
    pending: Queued,
    settings,
    auditing: bool,
    all_placed: bool,
) -> bool:
    """Whether the rule will probably hold once ``pending`` (queued, not judged) is in: its pairs added at each
    side's mean so far (``side_ms``: each side's samples summed; ``n``: the batches' pairs so far), the noise of the
    samples so far (``noise``) shrinking as one over the root of the count; ``all_placed``: the placements covered
    (``placement_judge.sampled_enough``) once it is in."""
    if n == 0:
        return False
    extra = len(pending.order) // 2
    noise *= math.sqrt(n / (n + extra))
    shortest = min(total * (n + extra) / n for total in side_ms.values())
    return enough(
        n + extra,
        noise,
        (not auditing or audited_enough(audit_counts(audits, pending))) and all_placed,
        shortest,
        settings,
    )
