"""What the GPU's clocks did during each batch of timing samples (NVML, read-only).

The timing engine reads this monitor once per batch, while the batch runs, and judges each batch
by the readings that bracket it. A batch during which the GPU was slowed by heat or by a hardware
slowdown (NVML's thermal violation counter grew, or a thermal/hardware throttle reason was set at
any of its readings) is thrown away and sampled again once
``cool_down`` has seen the slowdown clear.
Running at the software power cap is different: a heavy GEMM on an H100 sits at its power
limit in every batch (measured: 37.8 ms of power violation per batch at 700 W), so that is the
kernel's real steady state; such batches are kept and counted (``power_capped``) unless the
timing settings ask to discard them too. Every kept sample carries the SM clock read around
its batch (the one taken while it ran).

Without NVML, or on a CPU, the monitor reports "not available" and discards nothing: the
result says so rather than pretending the clocks were watched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from runner.gpu.nvml import HARMFUL_THROTTLE, _nvml, throttle_names

SW_POWER_CAP = 0x4


@dataclass(frozen=True)
class ClockReading:
    sm_clock_mhz: int
    throttle_mask: int
    power_violation_ns: int
    thermal_violation_ns: int


@dataclass(frozen=True)
class BatchClocks:
    sm_clock_mhz: float  # mean of the readings before and after the batch
    throttled: bool  # slowed by heat or hardware: to be thrown away
    why: str = ""
    power_capped: bool = False  # at the software power cap (kept unless asked otherwise)


class ClockMonitor:
    """Reads one GPU's SM clock, throttle reasons and violation counters by NVML."""

    def __init__(self, uuid: str | None) -> None:
        self.available = False
        self.why = "not a CUDA device"
        if uuid is None:
            return
        try:
            self._nv = _nvml()
            self._handle = self._nv.nvmlDeviceGetHandleByUUID(uuid)
            self.read()
        except Exception as exc:  # NVML missing or failing: the clocks are not watched
            self.why = f"NVML: {exc}"
            return
        self.available = True
        self.why = ""

    def read(self) -> ClockReading:
        nv, handle = self._nv, self._handle
        return ClockReading(
            sm_clock_mhz=nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
            throttle_mask=nv.nvmlDeviceGetCurrentClocksEventReasons(handle),
            power_violation_ns=_violation_ns(nv, handle, nv.NVML_PERF_POLICY_POWER),
            thermal_violation_ns=_violation_ns(nv, handle, nv.NVML_PERF_POLICY_THERMAL),
        )

    def judge(
        self,
        before: ClockReading,
        after: ClockReading,
        discard_power_capped: bool = False,
        during: ClockReading | None = None,
    ) -> BatchClocks:
        """A batch that ran between ``before`` and ``after``: its clock is ``during``'s (a reading taken while it
        ran) or else the mean of the two; a throttle reason set at any of the readings, or a violation counter
        that grew from ``before`` to ``after``, counts against it."""
        clock = during.sm_clock_mhz if during is not None else (before.sm_clock_mhz + after.sm_clock_mhz) / 2
        mask = before.throttle_mask | after.throttle_mask | (during.throttle_mask if during is not None else 0)
        power_grew = after.power_violation_ns > before.power_violation_ns
        reasons = []
        harmful = _slowdown(mask, discard_power_capped)
        if harmful:
            reasons.append("throttle: " + ",".join(throttle_names(harmful)))
        if discard_power_capped and power_grew:
            reasons.append(f"power violation {(after.power_violation_ns - before.power_violation_ns) / 1e6:.3f} ms")
        if after.thermal_violation_ns > before.thermal_violation_ns:
            thermal_ms = (after.thermal_violation_ns - before.thermal_violation_ns) / 1e6
            reasons.append(f"thermal violation {thermal_ms:.3f} ms")
        return BatchClocks(clock, bool(reasons), "; ".join(reasons), bool(mask & SW_POWER_CAP) or power_grew)

    def cool_down(self, limit_s: float, poll_s: float = 0.05) -> tuple[ClockReading, float]:
        """Idle until no thermal or hardware slowdown is set, at most ``limit_s``; the last reading and
        the seconds waited. Reads at least once."""
        started = time.perf_counter()
        while True:
            time.sleep(poll_s)
            reading = self.read()
            waited = time.perf_counter() - started
            if not _slowdown(reading.throttle_mask) or waited >= limit_s:
                return reading, waited


def _slowdown(mask: int, discard_power_capped: bool = False) -> int:
    """The throttle reasons in ``mask`` that spoil a batch: heat and hardware slowdowns, and the
    software power cap only when asked."""
    return mask & HARMFUL_THROTTLE & ~(0 if discard_power_capped else SW_POWER_CAP)


def _violation_ns(nv, handle, policy) -> int:
    try:
        return int(nv.nvmlDeviceGetViolationStatus(handle, policy).violationTime)
    except nv.NVMLError:  # not supported on this GPU: the throttle reasons still count
        return 0


def device_uuid(device) -> str | None:
    """The NVML UUID (``GPU-...``) of a torch CUDA device, or None on a CPU."""
    if device.type != "cuda":
        return None
    import torch

    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"
