"""A plain CUDA-event timer for one-off figures (calibration, the validator's eager times).

Not the timing engine (``runner/worker/timing.py``): no L2 flush, no interleaving, one
synchronisation per call. Warm-up calls run untimed first.
"""

from __future__ import annotations

import torch


def event_times_ms(fn, repeats: int = 20, warmup: int = 3) -> list[float]:
    """``fn()`` timed ``repeats`` times with CUDA events after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times
