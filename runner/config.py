"""The configuration schema: dataclasses stored in Hydra's ConfigStore.

Values live in ``conf/`` (one YAML per group option, presets in ``conf/experiment/``). The
schema is the first entry of the defaults list, so every YAML merged on top of it is
type-checked and an unknown key or a bad value fails at composition, before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore

from runner.static_check import IntegrityPolicy
from runner.worker.device_token import ISOLATE_DEVICE, ISOLATE_MEASUREMENTS
from runner.worker.protocol import TimingSettings


class DeviceKind(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


class SuiteLayout(str, Enum):
    native = "native"
    kernelbench = "kernelbench"


class ExecutorKind(str, Enum):
    local = "local"
    docker = "docker"
    auto = "auto"  # docker where an engine answers and the locked image is present, else local (loudly)


class GpuRequest(str, Enum):
    uuid = "uuid"  # a DeviceRequest for the locked GPU's UUID (NVIDIA container toolkit)
    cdi = "cdi"  # a CDI device name, <cdi_kind>=<UUID>, where the host uses CDI


class WorkerStart(str, Enum):
    fork = "fork"  # local: forked from a server per device that imported torch once (executors/fork_server.py)
    exec = "exec"  # local: each worker a fresh interpreter


class MeasurementIsolation(str, Enum):
    device = ISOLATE_DEVICE  # nothing of the run runs device work beside a measurement
    measurements = ISOLATE_MEASUREMENTS  # measurements exclude each other; unmeasured device work runs beside them


class MethodKind(str, Enum):
    reference = "reference"
    torch_compile = "torch_compile"
    directory = "directory"


class UnhealthyAction(str, Enum):
    proceed = "proceed"  # a GPU still hot or throttled after the cooldown limit: evaluate, and record it
    fail = "fail"  # stop the run (one line, non-zero exit); finished evaluations are kept for the resume


class ResumeMode(str, Enum):
    auto = "auto"  # resume the newest unfinished run of the same configuration, else start one
    never = "never"


@dataclass
class HardwareConfig:
    name: str = "cpu"
    device: DeviceKind = DeviceKind.cpu
    # Part of the name NVML gives the GPU this file describes ("H100"): a run on a GPU whose name does not hold it
    # stops before anything is written, since this file's peaks and limits would judge another GPU's kernels.
    # null: any GPU.
    gpu_name: str | None = None
    gpus: list[int] = field(default_factory=lambda: [0])
    check_shapes: list[str] = field(default_factory=lambda: ["small"])
    timed_shape: str = "small"
    cpu_threads: int | None = None
    peak_bandwidth_tbps: float | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    max_temperature_c: int | None = None
    # The health gate waits up to cooldown_limit_s for a hot or throttled GPU, then does on_unhealthy.
    cooldown_limit_s: float = 120.0
    on_unhealthy: UnhealthyAction = UnhealthyAction.proceed


@dataclass
class MethodConfig:
    kind: MethodKind = MethodKind.reference
    compile_mode: str | None = None
    path: str | None = None
    # What the static screen (runner/static_check.py) forbids in this method's candidates.
    integrity_policy: IntegrityPolicy = IntegrityPolicy.own_kernels


@dataclass
class ModelConfig:
    name: str = "none"
    provider: str | None = None
    endpoint: str | None = None
    temperature: float = 0.0
    max_tokens: int = 0


@dataclass
class SuiteConfig:
    name: str = "smoke"
    layout: SuiteLayout = SuiteLayout.native
    path: str | None = None
    tasks: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    # "K/N": the Kth of N interleaved parts of the selection (runner/tasks/suites.py), before ``limit``.
    shard: str | None = None
    limit: int | None = None


@dataclass
class ExecutorConfig:
    kind: ExecutorKind = ExecutorKind.local
    timeout_s: float = 600.0
    output_limit_mb: int = 64
    prestart: int = 2
    # How the local executor starts a worker (docker starts a container either way).
    start: WorkerStart = WorkerStart.fork
    # Evaluations running at once per GPU: their process start, imports, static screen, collection
    # and logging overlap; their device work (reference, candidate, timing) takes turns (a token).
    in_flight: int = 1
    # An evaluation starts on a GPU only while this much of its memory is free (NVML; what the ones started
    # in the last seconds have not allocated yet counted as taken), unless none of the run's others runs
    # there; one that ran out of memory because the others held it runs once more (runner/gpu/memory_admission.py).
    # 0: no admission by memory.
    admit_free_gib: float = 16.0
    # What a measurement excludes: `device` (the whole device: other evaluations' reference outputs,
    # correctness calls and checks wait for it) or `measurements` (only other measurements and the
    # compile warm-up; the rest runs beside it). runner/worker/device_token.py says what that costs.
    measurement_isolation: MeasurementIsolation = MeasurementIsolation.device
    # Whether a worker gives its cached device memory back while it holds the device's token, and holds it until
    # the driver has cleared that memory (3 ms per GiB): the driver's clearing slows every kernel that streams memory
    # by about 12% meanwhile, and a worker's exit frees it inside the next measurement otherwise
    # (runner/worker/memory_release.py). Off by default: over 40 reference evaluations on the H200 it cost 1.2 points
    # of duty and moved neither the disturbed batches nor the repeatability beyond one pair's noise (BENCHMARKS.md,
    # fifty-fourth session).
    release_under_token: bool = False
    # Whether a worker on a GPU loads its reference's kernels before its first shared phase, by capturing the
    # reference's calls into a CUDA graph it never launches: no device work, so off the device's token, while
    # the measurements queued before it run (runner/worker/preload.py). Alone, six suite tasks' reference stage fell
    # from 0.147 to 0.012 s (median, H100); on in h100_fullsuite, where it cut the cohorts' gaps from 19.3 s to
    # 13.4-13.9 s a pass (BENCHMARKS.md, twenty-seventh session).
    preload_kernels: bool = False
    # Whether kbench's own torch_compile candidate (its text checked by the worker) is imported and its first calls,
    # where torch.compile compiles, captured in the same window (runner/worker/preload.py); other candidates are
    # imported in their stage as always.
    preload_candidate: bool = False
    compile_threads: int = 1
    # Whether a spare makes its CUDA context holding the device's token (shared), so never while a
    # measurement runs. Batches beside a context were slowed 1.5-3x as often as others, but holding the
    # contexts off cut the slowed batches only from 4.7% to 4.3%, for 4 points of duty (BENCHMARKS.md,
    # thirteenth session): off by default, there to reproduce that.
    spare_context_under_token: bool = False
    # Whether a measurement one of whose sides waits for the device inside its calls (its host sets its pace) holds the
    # device's context lock from then to the end of its turn, so no other worker or warm-up makes its CUDA context
    # beside it: 21 of 47 such batches beside a context ran over 10% slow, 12 of 81 beside none, in a cold torch_compile
    # pass on an H100 (runner/worker/quiet_turn.py; BENCHMARKS.md, seventy-sixth session). A GPU with a token only.
    quiet_waiting_turns: bool = True
    warmup_workers: int = 0
    # Whether the compile warm-up runs beside the sweep (its workers keep ahead of it; each holds the device's token
    # shared for its device work and none while Dynamo compiles, at the lowest CPU priority: runner/warmup_beside.py)
    # or before each chunk of 4 × warmup_workers candidates with the GPU held and nothing measured meanwhile.
    warmup_beside: bool = True
    # Beside the sweep: null, every warm-up's device windows cut in between measurements (past the ready gate); N,
    # only once the sweep will start its evaluation among the next N (or waits for it), before that they wait at
    # the ready gate for the gaps where no measurement is ready (runner/warmup_beside.py).
    warmup_cut_in_within: int | None = None
    file_size_limit_mb: int = 2048
    env_passthrough: list[str] = field(default_factory=list)
    # The sandbox limits the docker executor enforces (local has no cgroup to enforce them with).
    memory_limit_mb: int = 16384
    pids_limit: int = 1024
    cpus: float | None = None  # a CFS quota; none by default, it would distort timings
    scratch_mb: int = 4096
    # docker: which image of manifests/images.lock (null: `gpu` for CUDA hardware, else `cpu`).
    image: str | None = None
    image_lock: str | None = None  # null: manifests/images.lock
    allow_unlocked_image: bool = False
    gpu_request: GpuRequest = GpuRequest.uuid
    cdi_kind: str = "nvidia.com/gpu"
    shared_compile_cache: bool = False
    # Where compile caches (inductor, Triton) live. null: inside the run folder. A path shared by
    # runs: a later run (a second pass, a resume elsewhere) loads the kernels an earlier one
    # compiled and autotuned instead of compiling its own, so both measure the same kernels.
    compile_cache_dir: str | None = None


@dataclass
class TrackingConfig:
    enabled: bool = True
    uri: str = "sqlite:///mlflow.db"
    experiment: str = "kbench"


@dataclass
class TimingConfig(TimingSettings):
    enabled: bool = True


@dataclass
class EvalConfig:
    seed: int = 42
    # Correctness trials per checked shape, each on fresh inputs from its own seed.
    trials: int = 5
    # Trials at the timed shape where it is checked too; None: ``trials``. The timed shape's inputs are
    # checked twice more after the timing (the last timed call, and new values at the same addresses).
    timed_shape_trials: int | None = None
    timing: TimingConfig = field(default_factory=TimingConfig)


@dataclass
class RunConfig:
    name: str = "kbench"
    out_dir: str = "runs"
    resume: ResumeMode = ResumeMode.auto
    progress: bool = True


@dataclass
class KbenchConfig:
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    method: dict[str, MethodConfig] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    run: RunConfig = field(default_factory=RunConfig)
    experiment: Any | None = None


def register_schema() -> None:
    ConfigStore.instance().store(name="base_config", node=KbenchConfig)
