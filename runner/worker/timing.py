"""The timing engine: reference and candidate measured in one process, interleaved.

Each sample times one call of a zero-argument closure. Reference and candidate samples
alternate in a random order so that drift (clocks, temperature, other tenants) hits both
sides equally. On a GPU: the L2 cache is flushed outside the timed region before every
sample ("cold"), CUDA events bracket the call, and events are queued for a whole batch with
one synchronisation per batch so the host never makes the GPU wait. Sampling stops when the
estimated relative noise of the median ratio is under the target (after a minimum count),
or at a sample or time cap. On a CPU the same loop runs on the host clock.
"""

from __future__ import annotations

import math
import random
import statistics
import time

import torch

from runner.worker.protocol import Timing, TimingSettings, TimingSummary


def measure_pair(
    reference, candidate, device: torch.device, settings: TimingSettings, shape: str, seed: int
) -> tuple[Timing, dict]:
    """Time ``reference`` and ``candidate`` (zero-argument closures); return summary and raw samples.

    ``seed`` drives the random interleaving order, so a rerun samples in the same order.
    """
    if device.type == "cuda":
        sampler = _CudaSampler(device, settings.cold)
    else:
        sampler = _HostSampler()
    started = time.perf_counter()
    _warm_up(reference, sampler, settings.warmup_ms)
    _warm_up(candidate, sampler, settings.warmup_ms)
    rng = random.Random(seed)
    samples = {"reference": [], "candidate": []}
    order_log = []
    stop_reason = "max_samples"
    while len(samples["reference"]) < settings.max_samples:
        order = []
        for _ in range(settings.batch):
            pair = ["reference", "candidate"]
            rng.shuffle(pair)
            order.extend(pair)
        times = sampler.run_batch([reference if side == "reference" else candidate for side in order])
        for side, elapsed in zip(order, times):
            samples[side].append(elapsed)
        order_log.extend(order)
        n = len(samples["reference"])
        noise = _ratio_noise(samples["reference"], samples["candidate"])
        if n >= settings.min_samples and noise <= settings.target_noise:
            stop_reason = "noise_target"
            break
        if time.perf_counter() - started > settings.time_cap_s and n >= min(settings.min_samples, 10):
            stop_reason = "time_cap"
            break
    wall = time.perf_counter() - started
    ref = _summarise(samples["reference"])
    cand = _summarise(samples["candidate"])
    timing = Timing(
        clock=sampler.clock,
        shape=shape,
        cache="cold" if sampler.flushes else "hot",
        reference=ref,
        candidate=cand,
        speedup=ref.median_ms / cand.median_ms if cand.median_ms > 0 else math.inf,
        ratio_noise=_ratio_noise(samples["reference"], samples["candidate"]),
        measured_s=(sum(samples["reference"]) + sum(samples["candidate"])) / 1000.0,
        wall_s=wall,
        stop_reason=stop_reason,
    )
    raw = {"unit": "ms", "order": order_log, **samples}
    return timing, raw


def _warm_up(fn, sampler, warmup_ms: float) -> None:
    spent = 0.0
    calls = 0
    while calls < 3 or spent < warmup_ms:
        spent += sum(sampler.run_batch([fn]))
        calls += 1
        if calls >= 1000:
            break


def _relative_median_error(values: list[float]) -> float:
    """Standard error of the median relative to it, from the interquartile range."""
    n = len(values)
    if n < 4:
        return math.inf
    q1, _, q3 = statistics.quantiles(values, n=4)
    median = statistics.median(values)
    if median <= 0:
        return math.inf
    sigma = (q3 - q1) / 1.349
    return 1.2533 * sigma / math.sqrt(n) / median


def _ratio_noise(reference: list[float], candidate: list[float]) -> float:
    return math.hypot(_relative_median_error(reference), _relative_median_error(candidate))


def _summarise(values: list[float]) -> TimingSummary:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) >= 2 else (values[0],) * 3
    return TimingSummary(
        median_ms=statistics.median(values),
        q1_ms=q1,
        q3_ms=q3,
        min_ms=min(values),
        mean_ms=statistics.fmean(values),
        samples=len(values),
        relative_noise=_relative_median_error(values),
    )


class _HostSampler:
    clock = "host_perf_counter"
    flushes = False

    def run_batch(self, fns) -> list[float]:
        times = []
        for fn in fns:
            start = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - start) / 1e6)
        return times


class _CudaSampler:
    clock = "cuda_events"

    def __init__(self, device: torch.device, cold: bool) -> None:
        self.device = device
        self.flushes = cold
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
        # Twice the L2 size, written before every sample, evicts whatever the last call left.
        self.flush_buffer = torch.empty(max(2 * l2_bytes, 64 << 20), dtype=torch.int8, device=device) if cold else None
        self.events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def _pairs(self, count: int):
        while len(self.events) < count:
            self.events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
        return self.events[:count]

    def run_batch(self, fns) -> list[float]:
        pairs = self._pairs(len(fns))
        for fn, (start, end) in zip(fns, pairs):
            if self.flush_buffer is not None:
                self.flush_buffer.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in pairs]
