"""What a run is asked to do, as plain values (``RunSettings``, from the composed configuration), and the ids its
lanes' sandboxes are pinned to.

Apart from the orchestrator so that ``kbench run`` can know them, and start the local executor's fork servers on
them, before it imports the orchestrator, the analysis and pandas: on the H200 machine the fork server's imports
(3.7-4.0 s) were what the sweep's first measurement waited on, and it started only after all of that
(BENCHMARKS.md, forty-sixth session).
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.gpu.nvml import read_gpu
from runner.worker.device_token import ISOLATE_DEVICE


@dataclass
class RunSettings:
    """What the orchestrator needs from the composed config, as plain values."""

    name: str
    suite: str
    hardware: str
    device: str  # "cpu" or "cuda"
    gpus: list[int]
    check_shapes: list[str]
    timed_shape: str
    cpu_threads: int | None
    max_temperature_c: int | None
    methods: dict[str, dict]
    model: str
    executor: str
    seed: int
    trials: int
    timing: dict | None
    progress: bool
    warmup_workers: int = 0
    # The compile warm-up beside the sweep (runner/warmup_beside.py), or before each chunk of it, the GPU held.
    warmup_beside: bool = True
    # Beside the sweep: None, every warm-up's windows cut in; N, only once the sweep will start its evaluation among
    # the next N (or waits for it), before that at the ready gate (runner/warmup_beside.py).
    warmup_cut_in_within: int | None = None
    peaks: dict | None = None  # {"bandwidth_tbps": .., "tflops": {dtype: ..}}: the roofline's ceilings
    in_flight: int = 1  # evaluations at once per device (their measurements take turns on its token)
    on_unhealthy: str = "proceed"  # the health gate still failing after cooldown: "proceed" (recorded) or "fail"
    cooldown_limit_s: float = 120.0
    measurement_isolation: str = ISOLATE_DEVICE  # what a measurement excludes (runner/worker/device_token.py)
    # Device memory given back and cleared with the token held, not by the exit (runner/worker/memory_release.py).
    release_under_token: bool = False
    # A turn whose side waits for the device holds the context lock: no context made beside it (runner/worker/quiet_turn.py).
    quiet_waiting_turns: bool = True
    # The reference's kernels loaded before the first shared phase (runner/worker/preload.py).
    preload_kernels: bool = False
    preload_candidate: bool = False  # kbench's own torch_compile candidate's first calls too (the worker checks it)
    admit_free_gib: float = 16.0  # an evaluation starts on a GPU with this much free (runner/gpu/memory_admission.py)
    timed_shape_trials: int | None = None  # correctness trials at the timed shape where it is checked (None: trials)
    gpu_name: str | None = None  # part of the NVML name of the GPU the hardware file describes (None: any)


def lane_gpu_id(index: int, reading: dict | None = None) -> str:
    """The id a lane's sandboxes are pinned to: the GPU's UUID, or its index where NVML cannot say."""
    reading = read_gpu(index) if reading is None else reading
    return reading["uuid"] if reading.get("available") else str(index)
