"""The timing engine: reference and candidate measured in one process, interleaved.

Each sample times one call of a zero-argument closure. Reference and candidate samples
alternate in a random order so that drift (clocks, temperature, other tenants) hits both
sides equally. On a GPU: the L2 cache is flushed outside the timed region before every
sample ("cold"), CUDA events bracket the call, and events are queued for a whole batch with
one synchronisation per batch so the host never makes the GPU wait. Sampling stops when the
estimated relative noise of the median ratio is under the target (after a minimum count),
or at a sample or time cap. On a CPU the same loop runs on the host clock.

Around every batch the GPU's clocks are read (``clocks.py``): a batch slowed by power or heat
is thrown away and taken again, and each kept sample records its SM clock. Each batch also
takes one audit sample per side closed by a device-wide synchronisation: the gap between the
audited and the event-timed median exposes work left running on another stream
(``sync_gap_ms``; judged in ``integrity.py``). ``sync="device"`` closes every sample that
way; ``graphs=True`` replays each side as a CUDA graph, keeping launch overhead out.
"""

from __future__ import annotations

import math
import random
import statistics
import time

import torch

from runner.worker.clocks import ClockMonitor, device_uuid
from runner.worker.protocol import Timing, TimingSettings, TimingSummary


def measure_pair(
    reference, candidate, device: torch.device, settings: TimingSettings, shape: str, seed: int
) -> tuple[Timing, dict]:
    """Time ``reference`` and ``candidate`` (zero-argument closures); return summary and raw samples.

    ``seed`` drives the random interleaving order, so a rerun samples in the same order.
    """
    cuda = device.type == "cuda"
    graphs = "off"
    if cuda and settings.graphs:
        try:
            reference, candidate = _as_graph(reference, device), _as_graph(candidate, device)
            graphs = "on"
        except Exception as exc:  # not capturable (host sync, side stream...): both sides eager
            graphs = f"capture failed: {type(exc).__name__}: {exc}"[:300]
            torch.cuda.synchronize(device)
    sampler = _CudaSampler(device, settings.cold, settings.sync == "device") if cuda else _HostSampler()
    monitor = ClockMonitor(device_uuid(device))
    window_start = time.time()
    started = time.perf_counter()
    _warm_up(reference, sampler, settings.warmup_ms)
    _warm_up(candidate, sampler, settings.warmup_ms)
    rng = random.Random(seed)
    sides = ("reference", "candidate")
    samples = {side: [] for side in sides}
    clocks = {side: [] for side in sides}
    audits = {side: [] for side in sides}
    throttled: list[dict] = []
    order_log = []
    stop_reason = "max_samples"
    while len(samples["reference"]) < settings.max_samples:
        order = []
        for _ in range(settings.batch):
            pair = list(sides)
            rng.shuffle(pair)
            order.extend(pair)
        before = monitor.read() if monitor.available else None
        times = sampler.run_batch([reference if side == "reference" else candidate for side in order])
        audit = sampler.audit((reference, candidate)) if cuda and settings.sync == "events" else None
        batch_clock = monitor.judge(before, monitor.read()) if monitor.available else None
        if batch_clock is not None and batch_clock.throttled:
            throttled.append({"after_samples": len(samples["reference"]), "why": batch_clock.why})
            if len(throttled) > settings.max_throttled_batches:
                stop_reason = "throttled"
                break
            continue  # thrown away and taken again
        for side, elapsed in zip(order, times):
            samples[side].append(elapsed)
            clocks[side].append(batch_clock.sm_clock_mhz if batch_clock else None)
        if audit is not None:
            audits["reference"].append(audit[0])
            audits["candidate"].append(audit[1])
        order_log.extend(order)
        n = len(samples["reference"])
        noise = _ratio_noise(samples["reference"], samples["candidate"])
        if n >= settings.min_samples and noise <= settings.target_noise:
            stop_reason = "noise_target"
            break
        if time.perf_counter() - started > settings.time_cap_s and n >= min(settings.min_samples, 10):
            stop_reason = "time_cap"
            break
    if not samples["reference"]:
        raise RuntimeError(f"no sample kept: the GPU was throttled in every batch ({throttled[-1]['why']})")
    wall = time.perf_counter() - started
    ref = _summarise(samples["reference"])
    cand = _summarise(samples["candidate"])
    kept_clocks = [c for c in clocks["reference"] if c is not None]
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
        sync=settings.sync if cuda else "host",
        graphs=graphs,
        clocks_watched="nvml" if monitor.available else monitor.why,
        sm_clock_mhz=statistics.median(kept_clocks) if kept_clocks else None,
        throttled_batches=len(throttled),
        sync_gap_ms={
            side: statistics.median(audits[side]) - statistics.median(samples[side]) for side in sides if audits[side]
        },
        window=[window_start, time.time()],
    )
    raw = {
        "unit": "ms",
        "order": order_log,
        **samples,
        "sm_clock_mhz": clocks,
        "sync_audit": audits,
        "throttled_batches": throttled,
    }
    return timing, raw


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


# ~100 us at H100 clocks: longer than launching a typical call from Python.
_LAUNCH_COVER_CYCLES = 200_000


class _CudaSampler:
    clock = "cuda_events"

    def __init__(self, device: torch.device, cold: bool, device_sync: bool = False) -> None:
        self.device = device
        self.flushes = cold
        self.device_sync = device_sync
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
            if self.device_sync:
                torch.cuda.synchronize(self.device)  # every stream's work ends before the end event
            end.record()
        torch.cuda.synchronize(self.device)
        return [start.elapsed_time(end) for start, end in pairs]

    def audit(self, fns) -> list[float]:
        """One sample per function closed by a device-wide synchronisation (not kept as timing).

        A spin kernel ahead of the start event keeps the GPU busy while the host launches the
        call, so the host's launch latency is not counted; what the synchronisation adds beyond
        the events is then its own latency (alike for both sides) plus work on other streams.
        """
        pairs = self._pairs(len(fns))
        times = []
        for fn, (start, end) in zip(fns, pairs):
            if self.flush_buffer is not None:
                self.flush_buffer.zero_()
            torch.cuda._sleep(_LAUNCH_COVER_CYCLES)
            start.record()
            fn()
            torch.cuda.synchronize(self.device)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return times
