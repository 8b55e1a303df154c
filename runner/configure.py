"""Composing and checking a run's configuration (Hydra compose API, schema from ``config.py``).

Any mistake (unknown key, bad value, unknown group option, missing required value) becomes a
``ConfigError`` with one line that says what is wrong, raised before any work starts.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from runner.config import KbenchConfig, register_schema
from runner.paths import CONF_DIR
from runner.run_settings import RunSettings

# Keys that change how a run is driven, not what it measures: left out of the config hash.
VOLATILE_KEYS = (
    ("run", "resume"),
    ("run", "progress"),
    ("executor", "prestart"),
    ("executor", "start"),
    ("executor", "in_flight"),
    ("executor", "admit_free_gib"),
    ("executor", "preload_kernels"),
    ("executor", "preload_candidate"),
    ("executor", "release_under_token"),
    ("executor", "quiet_waiting_turns"),
    ("executor", "compile_cache_dir"),
    ("executor", "warmup_workers"),
    ("executor", "warmup_beside"),
    ("executor", "warmup_cut_in_within"),
    ("executor", "compile_threads"),
    ("executor", "timeout_s"),
)


class ConfigError(ValueError):
    pass


def _one_line(exc: BaseException) -> str:
    parts = []
    while exc is not None and len(parts) < 3:
        text = str(exc).strip().splitlines()
        line = text[0] if text else type(exc).__name__
        if line and line not in parts:
            parts.append(line)
        exc = exc.__cause__
    return ": ".join(parts)


def compose_config(overrides: list[str]) -> DictConfig:
    register_schema()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        # The schema again, strictly: keys added with '+' must exist in it too.
        plain = OmegaConf.create(OmegaConf.to_container(cfg, enum_to_str=True))
        merged = OmegaConf.merge(OmegaConf.structured(KbenchConfig), plain)
        OmegaConf.to_container(merged, throw_on_missing=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_one_line(exc)) from None
    OmegaConf.set_readonly(merged, True)
    return merged


def _identifying(cfg: DictConfig) -> dict:
    """The resolved config without volatile keys: what identifies a run's configuration."""
    data = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    for section, key in VOLATILE_KEYS:
        data.get(section, {}).pop(key, None)
    return data


def hashed_yaml(cfg: DictConfig) -> str:
    """What the config hash is taken of (``_identifying``), as YAML."""
    return OmegaConf.to_yaml(OmegaConf.create(_identifying(cfg)))


def changed_settings(earlier_yaml: str, cfg: DictConfig) -> list[str]:
    """The settings (dotted keys) whose values differ between a run's saved ``config.yaml`` and ``cfg``, the keys
    left out of the config hash apart: what keeps a rerun from resuming that run. A setting one of them lacks
    (added or removed by another kbench version) differs too, whatever its value."""
    earlier, now = _flat(_identifying(OmegaConf.create(earlier_yaml))), _flat(_identifying(cfg))
    return sorted(
        key for key in earlier.keys() | now.keys() if key not in earlier or key not in now or earlier[key] != now[key]
    )


def _flat(data, prefix: str = "") -> dict:
    if not isinstance(data, dict) or not data:
        return {prefix: data}
    flat = {}
    for key, value in data.items():
        flat.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def to_settings(cfg: DictConfig) -> RunSettings:
    if not cfg.method:
        raise ConfigError("no method selected (method=reference, or method=[reference,torch_compile])")
    methods = {}
    for name, method in cfg.method.items():
        options = OmegaConf.to_container(method, enum_to_str=True)
        if options["kind"] == "directory" and not options.get("path"):
            raise ConfigError(f"method {name}: directory needs method.{name}.path=/folder/with/candidates")
        methods[name] = options
    timing = OmegaConf.to_container(cfg.eval.timing)
    enabled = timing.pop("enabled")
    if timing["sync"] not in ("events", "device"):
        raise ConfigError(f"eval.timing.sync must be 'events' or 'device', not {timing['sync']!r}")
    if cfg.eval.trials < 1:
        raise ConfigError("eval.trials must be at least 1")
    if cfg.eval.timed_shape_trials is not None and cfg.eval.timed_shape_trials < 1:
        raise ConfigError(f"eval.timed_shape_trials must be at least 1 (or null), not {cfg.eval.timed_shape_trials}")
    if cfg.executor.in_flight < 1:
        raise ConfigError(f"executor.in_flight must be at least 1, not {cfg.executor.in_flight}")
    within = cfg.executor.warmup_cut_in_within
    if within is not None and within < 0:
        raise ConfigError(f"executor.warmup_cut_in_within must be 0 or more (or null: always), not {within}")
    if cfg.executor.admit_free_gib < 0:
        raise ConfigError(f"executor.admit_free_gib must be 0 (off) or more, not {cfg.executor.admit_free_gib}")
    for name in ("placements", "input_sets", "batch"):
        if cfg.eval.timing[name] < 1:
            raise ConfigError(f"eval.timing.{name} must be at least 1, not {cfg.eval.timing[name]}")
    if not cfg.eval.timing.flush_l2_multiple > 0:
        raise ConfigError(f"eval.timing.flush_l2_multiple must be over 0, not {cfg.eval.timing.flush_l2_multiple}")
    if not 0 < cfg.eval.timing.audit_share <= 1:
        raise ConfigError(f"eval.timing.audit_share must be over 0 and at most 1, not {cfg.eval.timing.audit_share}")
    if cfg.eval.timing.batch_min_ms < 0:
        raise ConfigError(f"eval.timing.batch_min_ms must not be negative, not {cfg.eval.timing.batch_min_ms}")
    if cfg.eval.timing.min_time_s < 0:
        raise ConfigError(f"eval.timing.min_time_s must not be negative, not {cfg.eval.timing.min_time_s}")
    if len(set(cfg.hardware.gpus)) != len(cfg.hardware.gpus) or not cfg.hardware.gpus:
        raise ConfigError(f"hardware.gpus must list distinct GPU indices, not {list(cfg.hardware.gpus)}")
    return RunSettings(
        name=cfg.run.name,
        suite=cfg.suite.name,
        hardware=cfg.hardware.name,
        gpu_name=cfg.hardware.gpu_name,
        device=cfg.hardware.device.value,
        gpus=list(cfg.hardware.gpus),
        check_shapes=list(cfg.hardware.check_shapes),
        timed_shape=cfg.hardware.timed_shape,
        cpu_threads=cfg.hardware.cpu_threads,
        max_temperature_c=cfg.hardware.max_temperature_c,
        methods=methods,
        model=cfg.model.name,
        executor=cfg.executor.kind.value,
        seed=cfg.eval.seed,
        trials=cfg.eval.trials,
        timed_shape_trials=cfg.eval.timed_shape_trials,
        timing=timing if enabled else None,
        progress=cfg.run.progress,
        warmup_workers=cfg.executor.warmup_workers,
        warmup_beside=cfg.executor.warmup_beside,
        warmup_cut_in_within=cfg.executor.warmup_cut_in_within,
        in_flight=cfg.executor.in_flight,
        admit_free_gib=cfg.executor.admit_free_gib,
        measurement_isolation=cfg.executor.measurement_isolation.value,
        release_under_token=cfg.executor.release_under_token,
        quiet_waiting_turns=cfg.executor.quiet_waiting_turns,
        preload_kernels=cfg.executor.preload_kernels,
        preload_candidate=cfg.executor.preload_candidate,
        on_unhealthy=cfg.hardware.on_unhealthy.value,
        cooldown_limit_s=cfg.hardware.cooldown_limit_s,
        peaks=(
            {"bandwidth_tbps": cfg.hardware.peak_bandwidth_tbps, "tflops": dict(cfg.hardware.peak_tflops)}
            if cfg.hardware.peak_bandwidth_tbps
            else None
        ),
    )


def wrong_gpu(hardware: str, gpu_name: str | None, index: int, reading: dict) -> str | None:
    """Why GPU ``index`` (its NVML ``reading``) is not the GPU that the hardware file ``hardware`` describes (its
    ``gpu_name`` is no part of the GPU's name), in one line that names the file to use where one describes this
    GPU; None where it is, or where the file names no GPU. One GPU's peaks would judge another's kernels: on an
    H200 under the H100's file, 28 of 222 honest reference kernels were flagged faster than physics (BENCHMARKS.md,
    twenty-fifth session)."""
    name = str(reading.get("name") or "")
    if not gpu_name or gpu_name.lower() in name.lower():
        return None
    fitting = hardware_for_gpu(name)
    instead = f"use hardware={fitting}" if fitting else "write a hardware file for it"
    return (
        f"hardware={hardware} describes an {gpu_name} GPU, but GPU {index} is {name or 'of no known name'}: "
        f"{instead}, or set hardware.gpu_name=null to judge it by {hardware}'s peaks anyway"
    )


def hardware_for_gpu(name: str) -> str | None:
    """The first hardware file (``conf/hardware``, by name) whose ``gpu_name`` is part of ``name``, a GPU's name as
    NVML or torch gives it; None where none describes it."""
    for path in sorted((CONF_DIR / "hardware").glob("*.yaml")):
        gpu_name = OmegaConf.load(path).get("gpu_name")
        if gpu_name and str(gpu_name).lower() in name.lower():
            return path.stem
    return None
