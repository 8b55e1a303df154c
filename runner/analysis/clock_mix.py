"""Whether the GPU's clocks explain a speedup's move between two runs: ``repeat``'s ``at_matched_clocks``.

Clocks are not locked (kbench reads them and never sets them), and a task that draws the GPU to its power cap runs
its batches at whatever SM clock the power controller allows at the moment: 1,395 to 1,980 MHz for one reduction on
an H200. Both sides of a batch run at that batch's clock, but where one side gains more from a higher clock than
the other, the speedup depends on the clock too, and the pooled median on how many batches each clock got. Two runs
that got different mixes then differ by more than either's noise says: std_unbiased_lastdim_fp32's torch_compile
speedup moved 2.7% between the two passes of ``make bench`` (median SM clocks 1,890 and 1,965 MHz), and 0.3% at the
clocks both runs had (BENCHMARKS.md, forty-second session).

So each run's kept batches are grouped by their clock (``sm_clock_mhz`` in ``samples.json``, the reading around the
batch, in NVML's 15 MHz steps), and the two runs' speedups are compared clock by clock where both have batches: each
clock's median batch speedup in the second run over the first's, as logarithms, averaged with each clock weighted by
the fewer of its batches in the two runs. A move that stays at matched clocks is the kernels' own; one that goes away
was the clocks'. This is a reading of the move, not a second speedup: the figure a run reports stays its pooled
median over the clocks it ran at, as the GPU ran them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from runner.worker.placement_judge import batch_speedups

# NVML reports the SM clock in steps of this size; a batch's clock (the mean of the readings around it) is taken to
# the nearest step.
CLOCK_STEP_MHZ = 15


def batch_speedups_by_clock(samples: dict) -> dict[int, list[float]]:
    """A run's kept batches (``samples.json``), grouped by their SM clock to the nearest ``CLOCK_STEP_MHZ``: the
    clock -> each batch's speedup (its reference median over its candidate median), in batch order. Batches without
    a clock reading (no NVML, a CPU run) or with a median of zero are left out."""
    batches = len(samples.get("batch_placement") or [])
    if not batches:
        return {}
    batch = len(samples["reference"]) // batches
    clocks = samples.get("sm_clock_mhz", {}).get("reference") or []
    # Each batch's clock where a placement would stand: the engine's batch speedups, grouped by clock.
    steps = [
        CLOCK_STEP_MHZ * round(clocks[k * batch] / CLOCK_STEP_MHZ)
        if k * batch < len(clocks) and clocks[k * batch] is not None
        else None
        for k in range(batches)
    ]
    by_clock = batch_speedups(samples, steps, batch)
    by_clock.pop(None, None)
    return by_clock


def moved_at_matched_clocks(first: dict, second: dict) -> dict | None:
    """How far the speedup moved from the first run to the second at the clocks both ran batches at (each a
    ``samples.json``): ``moved_pct`` (signed, as ``repeat``'s sides' moves), ``clocks`` (how many were shared) and
    ``batches`` (the weights' sum: each shared clock counts the fewer of its batches in the two runs). None where
    the runs share no clock."""
    a, b = batch_speedups_by_clock(first), batch_speedups_by_clock(second)
    shared = sorted(a.keys() & b.keys())
    if not shared:
        return None
    weights = [min(len(a[clock]), len(b[clock])) for clock in shared]
    logs = [math.log(statistics.median(b[clock]) / statistics.median(a[clock])) for clock in shared]
    mean = sum(w * x for w, x in zip(weights, logs)) / sum(weights)
    return {"moved_pct": 100 * math.expm1(mean), "clocks": len(shared), "batches": sum(weights)}


def read_samples(path: Path) -> dict | None:
    """A ``samples.json``, or None where it is missing or not readable as one (an evaluation that did not time)."""
    try:
        samples = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return samples if isinstance(samples, dict) and "reference" in samples and "candidate" in samples else None
