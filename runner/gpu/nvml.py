"""NVML readings (read-only) and the health gate run before each GPU evaluation.

Without NVML or without a GPU every reading degrades to ``{"available": False, "why": ...}``
so that CPU runs record "not available" rather than failing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean a measurement taken now would be slowed by power or heat.
HARMFUL_THROTTLE = 0x4 | 0x8 | 0x20 | 0x40 | 0x80


class NvmlUnavailable(RuntimeError):
    pass


def _nvml():
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable("nvidia-ml-py is not installed") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML did not initialise: {exc}") from exc
    return pynvml


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def _safe(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # a query this driver or GPU does not support is recorded as such
        return f"n/a ({type(exc).__name__})"


def read_gpu(index: int) -> dict:
    """A snapshot of one GPU: identity, clocks, temperature, power, throttling, processes."""
    try:
        nv = _nvml()
    except NvmlUnavailable as exc:
        return {"available": False, "why": str(exc)}
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except nv.NVMLError as exc:
        return {"available": False, "why": f"no GPU {index}: {exc}"}
    clocks = nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM
    reasons = _safe(nv.nvmlDeviceGetCurrentClocksEventReasons, handle)
    memory = _safe(nv.nvmlDeviceGetMemoryInfo, handle)  # one reading for both figures
    return {
        "available": True,
        "index": index,
        "name": _safe(nv.nvmlDeviceGetName, handle),
        "uuid": _safe(nv.nvmlDeviceGetUUID, handle),
        "driver": _safe(nv.nvmlSystemGetDriverVersion),
        "cuda_driver": _safe(nv.nvmlSystemGetCudaDriverVersion_v2),
        "temperature_c": _safe(nv.nvmlDeviceGetTemperature, handle, nv.NVML_TEMPERATURE_GPU),
        "sm_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, handle, clocks[0]),
        "mem_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, handle, clocks[1]),
        "sm_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, handle, clocks[0]),
        "mem_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, handle, clocks[1]),
        "sm_clock_app_mhz": _safe(nv.nvmlDeviceGetApplicationsClock, handle, clocks[0]),
        "power_w": _watts(_safe(nv.nvmlDeviceGetPowerUsage, handle)),
        "power_limit_w": _watts(_safe(nv.nvmlDeviceGetEnforcedPowerLimit, handle)),
        "persistence_mode": _safe(nv.nvmlDeviceGetPersistenceMode, handle),
        "memory_total_bytes": int(memory.total) if not isinstance(memory, str) else memory,
        "memory_used_bytes": int(memory.used) if not isinstance(memory, str) else memory,
        "throttle_mask": reasons,
        "throttle_reasons": throttle_names(reasons) if isinstance(reasons, int) else reasons,
        "compute_processes": _compute_pids(nv, handle),
        "ecc_uncorrected": _safe(
            nv.nvmlDeviceGetTotalEccErrors, handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
        ),
        # The host CPUs nearest the GPU, as the driver sees them (its ideal affinity): for reading the workers' own
        # (``runner/worker/host_cpu.py``) against.
        "local_cpus": _safe(_local_cpus, nv, handle),
    }


def compute_processes(index: int) -> list[int] | str:
    """The PIDs NVML lists as compute processes on GPU ``index`` (``read_gpu``'s ``compute_processes`` alone: the
    health gate's re-reads for processes ending ask only this, every ``ENDING_POLL_S``), or why it cannot say."""
    try:
        nv = _nvml()
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # NVML missing, or no such GPU: said as read_gpu's unsupported queries say it
        return f"n/a ({type(exc).__name__})"
    return _compute_pids(nv, handle)


def _compute_pids(nv, handle) -> list[int] | str:
    processes = _safe(nv.nvmlDeviceGetComputeRunningProcesses, handle)
    return [p.pid for p in processes] if isinstance(processes, list) else processes


# Words of NVML's CPU affinity mask asked for: 64 bits each, 1,024 CPUs.
_AFFINITY_WORDS = 16


def _local_cpus(nv, handle) -> list[int]:
    return cpus_of_mask(list(nv.nvmlDeviceGetCpuAffinity(handle, _AFFINITY_WORDS)))


def cpus_of_mask(words: list[int], word_bits: int = 64) -> list[int]:
    """The CPUs set in a bitmask given as words, lowest CPUs in the first word (NVML's CPU affinity masks)."""
    return [k * word_bits + bit for k, word in enumerate(words) for bit in range(word_bits) if word >> bit & 1]


def device_memory(index: int) -> tuple[int, int] | None:
    """``(free, total)`` bytes of GPU ``index`` as NVML counts them (every process's allocations and
    contexts), or None where NVML cannot say."""
    try:
        nv = _nvml()
        info = nv.nvmlDeviceGetMemoryInfo(nv.nvmlDeviceGetHandleByIndex(index))
    except Exception:  # NVML missing, or a GPU or driver that does not answer: no admission by memory
        return None
    return int(info.free), int(info.total)


def _watts(milliwatts):
    return milliwatts / 1000.0 if isinstance(milliwatts, int) else milliwatts


@dataclass
class GateOutcome:
    ok: bool
    waited_s: float
    reading: dict
    problems: list[str]
    # How many of the run's own evaluations were running on the GPU when it was read: with any, the gate
    # did not wait (a slowdown then is, or cannot be told from, the run's own load).
    others_running: int = 0
    # What made it wait, as first read (empty where it did not wait): a gate that waited and then passed
    # says why it waited, and from what temperature.
    waited_for: list[str] = field(default_factory=list)
    # Processes NVML listed that were neither this run's nor its descendants, and left NVML's list within
    # ``ENDING_GRACE_S``: contexts being torn down (``health_gate``), not tenants.
    ended: list[int] = field(default_factory=list)


# How long the gate reads NVML again for processes that look foreign, to tell one ending from a tenant.
ENDING_GRACE_S = 1.5
# How often it reads meanwhile.
ENDING_POLL_S = 0.05


def health_gate(
    index: int,
    max_temperature_c: int | None,
    own_pids: set[int] = frozenset(),
    cooldown_limit_s: float = 120.0,
    others_running: int = 0,
    ending_grace_s: float = ENDING_GRACE_S,
) -> GateOutcome:
    """Wait (up to a limit) for the GPU to be cool and unthrottled; note foreign processes.

    Temperature and power/thermal throttling are waited out, since they pass. Foreign compute
    processes are recorded, not waited for: another tenant does not leave on its own schedule.
    Processes of this run (``own_pids``, and any process descended from this one: a worker the
    executor is still handing its job, or one tearing its context down) are not foreign. Nor is one
    that leaves NVML's list within ``ending_grace_s``: a process ending (reaped, or left without its parent, so ``/proc``
    no longer tells whose it was) while its context is torn down, ours as a rule. On the H100 a cold
    torch_compile pass so flagged two gates out of 222, with three of its own workers then ending
    (BENCHMARKS.md, sixty-ninth session). A tenant stays listed, and costs the gate the grace.

    With ``others_running`` of the run's own evaluations on the GPU, its state read once, no cooldown: their
    work keeps the GPU as hot and power-capped as it is (a measurement of a matmul chain draws the
    power limit), so waiting would only idle this evaluation's slot, and on the H100 it held eight
    slots up to 10 s each (BENCHMARKS.md, fifteenth session). A throttle reason is then no problem
    here; the temperature limit still is. The GPU's state during a measurement is judged batch by
    batch by the timing loop, which throws slowed batches away and idles the GPU until they clear.
    """
    started = time.monotonic()
    waited_for: list[str] = []
    while True:
        reading = read_gpu(index)
        if not reading.get("available"):
            return GateOutcome(False, 0.0, reading, [reading.get("why", "NVML not available")], others_running)
        passing = []
        temperature = reading["temperature_c"]
        if max_temperature_c is not None and isinstance(temperature, int) and temperature > max_temperature_c:
            passing.append(f"temperature {temperature} C > {max_temperature_c} C")
        mask = reading["throttle_mask"]
        if isinstance(mask, int) and mask & HARMFUL_THROTTLE and not others_running:
            passing.append("throttled: " + ", ".join(throttle_names(mask & HARMFUL_THROTTLE)))
        waited = time.monotonic() - started
        if not passing or others_running or waited >= cooldown_limit_s:
            break
        waited_for = waited_for or passing
        time.sleep(2.0)
    problems = list(passing)
    processes = reading["compute_processes"]
    ended: list[int] = []
    if isinstance(processes, list):
        foreign = [pid for pid in processes if pid not in own_pids and not descends_from_this_process(pid)]
        if foreign:
            foreign, ended = _still_listed(index, foreign, ending_grace_s)
        if foreign:
            problems.append(f"foreign compute processes {foreign}")
    return GateOutcome(not problems, waited, reading, problems, others_running, waited_for, ended)


def _still_listed(index: int, pids: list[int], grace_s: float) -> tuple[list[int], list[int]]:
    """``pids`` split into those NVML still lists on GPU ``index`` after ``grace_s`` and those it stopped listing
    before (read every ``ENDING_POLL_S``; back as soon as none is left)."""
    deadline = time.monotonic() + grace_s
    listed = list(pids)
    while listed and time.monotonic() < deadline:
        time.sleep(ENDING_POLL_S)
        now = compute_processes(index)
        if isinstance(now, list):
            listed = [pid for pid in listed if pid in now]
    return listed, [pid for pid in pids if pid not in listed]


def descends_from_this_process(pid: int) -> bool:
    """Whether ``pid`` is a child, grandchild... of this process (read from ``/proc``; False where there is none,
    or the process is gone, or it lives in another PID namespace, like a container's)."""
    me = os.getpid()
    for _ in range(64):  # a parent chain is short; a bound all the same
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ")".
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if pid == me:
            return True
        if pid <= 1:
            return False
    return False
