"""The roofline of one timed shape: the fastest any kernel could be on this GPU, and how close we got.

From a task's FLOPs and minimal-bytes formulas (evaluated at the timed shape) and the
hardware's peaks (``conf/hardware/*.yaml``), the floor is ``max(bytes / bandwidth, flops /
math rate)``: no kernel can finish sooner, since it must at least move its inputs and outputs
once and do its arithmetic. Each side's achieved TB/s, TFLOP/s and percent of the roofline
("speed of light") follow from its median time.

Two math rates: the *reporting* peak is the task dtype's own (fp32: the non-tensor-core
rate), while the *physics* check uses the fastest rate listed for the GPU (a bf16-output task
may do its math in fp8; an fp32 task may use 3xTF32 emulation), so an honest kernel is never
called impossible. A candidate measured below ``PHYSICS_MARGIN`` of the physics floor is not a
speedup: the worker ends it as ``integrity_violation`` / ``faster_than_physics``. Only
cold-cache timing is judged (a warm L2 can legitimately beat the HBM floor).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from runner.tasks.formulas import evaluate

# Data-sheet peaks are not exact (boost clocks, rounding): a candidate must come in under 90%
# of the floor to be called impossible.
PHYSICS_MARGIN = 0.9


@dataclass
class Roofline:
    flops: float
    bytes: float
    floor_ms: float  # with the reporting peaks: 100% "speed of light"
    physics_floor_ms: float  # with the permissive peaks: below this x PHYSICS_MARGIN is impossible
    bound: str  # "memory" or "compute"
    peak_bandwidth_tbps: float
    peak_tflops: float | None

    def achieved(self, median_ms: float) -> dict:
        seconds = median_ms / 1e3
        return {
            "tbps": self.bytes / seconds / 1e12 if seconds > 0 else None,
            "tflops": self.flops / seconds / 1e12 if seconds > 0 else None,
            "sol_pct": 100.0 * self.floor_ms / median_ms if median_ms > 0 else None,
        }

    def impossible(self, median_ms: float) -> str | None:
        if median_ms >= PHYSICS_MARGIN * self.physics_floor_ms:
            return None
        return (
            f"{median_ms:.4f} ms is under {PHYSICS_MARGIN:.0%} of the physical floor {self.physics_floor_ms:.4f} ms "
            f"({self.bytes / 1e6:.1f} MB at {self.peak_bandwidth_tbps} TB/s, {self.flops / 1e9:.2f} GFLOP)"
        )

    def to_dict(self) -> dict:
        return asdict(self)


def roofline_for(task: dict, dims: dict, peaks: dict | None) -> Roofline | None:
    """``task`` has ``flops``, ``bytes`` (formulas) and ``dtype``; ``peaks`` the hardware's figures."""
    if not peaks or not peaks.get("bandwidth_tbps") or not task.get("flops") or not task.get("bytes"):
        return None
    values = {name: float(value) for name, value in dims.items()}
    flops, moved = evaluate(task["flops"], values), evaluate(task["bytes"], values)
    bandwidth = float(peaks["bandwidth_tbps"]) * 1e12
    rates = {name: float(rate) * 1e12 for name, rate in (peaks.get("tflops") or {}).items()}
    fastest = max(rates.values(), default=None)
    own = rates.get(task.get("dtype", ""), fastest)
    memory_s = moved / bandwidth
    compute_s = flops / own if own else 0.0
    physics_compute_s = flops / fastest if fastest else 0.0
    return Roofline(
        flops=flops,
        bytes=moved,
        floor_ms=1e3 * max(memory_s, compute_s),
        physics_floor_ms=1e3 * max(memory_s, physics_compute_s),
        bound="memory" if memory_s >= compute_s else "compute",
        peak_bandwidth_tbps=float(peaks["bandwidth_tbps"]),
        peak_tflops=own / 1e12 if own else None,
    )
