"""Which configs the candidate's autotuned kernels ran, as this process loaded them: ``result.autotuning``.

A kernel with several configs runs the one its autotuning chose, and that choice is part of what was measured:
two cold compiles of the same torch_compile candidates on one H200 chose differently for 144 of 435 Inductor kernels
(94 of 222 tasks), and one of the four of those tasks that were timed ran 2.2% slower with the other choice
(BENCHMARKS.md, forty-first session). So each evaluation records, for every autotuned kernel it loaded:

- Inductor's kernels (``torch.compile``): each ``CachingAutotuner`` in the modules Inductor loaded into this process
  (``PyCodeCache``): the kernel's name, its source hash (the name of its file in the compile cache, the same for the
  same kernel in any run of the same torch), how its config was found (``autotune_cache_state``: ``hit``, chosen by an
  earlier process, the warm-up as a rule, and read from the compile cache; ``miss``, autotuned in this process and
  kept in the cache; ``uncached``, autotuned in this process among configs the cache does not keep; ``only 1
  config``) and the config it ran: the one launcher left after autotuning, else the cached choice; where it was
  autotuned here, how long timing its configs took (``benchmark_ms``: GPU work, in the warm-up's windows as a rule,
  in the evaluation's first phase where ``uncached``);
- Triton's own autotuners (``@triton.autotune``) in the candidate's module: the configs to choose from and the one
  chosen for each key it was called with (Triton keeps them in the process only).

Read from the objects in this process once the timing is over, on the host; nothing here runs on the device, and
nothing is imported that the candidate did not import already (a method without Inductor records no Inductor kernels).
"""

from __future__ import annotations

import sys
from types import ModuleType

# How a kernel's config was found where Inductor timed configs in this process that its compile cache will not keep:
# its cache lookup found one config (``only 1 config``, no cache entry) or none was made, and Inductor then made more,
# a reduction's ``R0_BLOCK`` halved where its registers limit the occupancy (``_dynamic_scale_rblock``, torch 2.11),
# and timed them at the first call. So every process times them again, beside whatever else runs on the GPU: one
# reduction of unet_resblock_sd15_fp16 ran ``R0_BLOCK`` 1024 in one pass and 2048 in the next on one compile cache
# (BENCHMARKS.md, forty-second session).
UNCACHED = "uncached"


def autotuning_record(candidate: ModuleType | None) -> dict:
    """``{"kernels": [...], "autotuned": how many had more than one config to choose from}`` for the Inductor kernels
    this process loaded and the Triton autotuners in ``candidate``'s module."""
    kernels = inductor_kernels(_inductor_modules()) + triton_autotuners(candidate)
    chose = sum(
        1 for kernel in kernels if (kernel.get("configs") or 1) > 1 or kernel.get("found_by") in ("hit", UNCACHED)
    )
    return {"kernels": kernels, "autotuned": chose}


def read_autotuning(candidate: ModuleType | None) -> dict:
    """``autotuning_record``, or why it could not be read (another torch's or Triton's objects): whatever the record,
    the evaluation's verdict and the warm-up's outcome stand."""
    try:
        return autotuning_record(candidate)
    except Exception as exc:  # noqa: BLE001
        return {"not_read": f"{type(exc).__name__}: {exc}"[:300]}


def _inductor_modules() -> list[ModuleType]:
    """The modules Inductor loaded into this process (its generated wrappers and kernels), if it was imported."""
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return []
    cache = codecache.PyCodeCache
    modules = list(getattr(cache, "modules", []))
    modules += [m for m in getattr(cache, "modules_no_attr", {}).values() if m not in modules]
    return modules


def inductor_kernels(modules: list[ModuleType]) -> list[dict]:
    """Each ``CachingAutotuner`` among ``modules``' names, once (a wrapper names the kernels it launches too)."""
    heuristics = sys.modules.get("torch._inductor.runtime.triton_heuristics")
    autotuner_class = getattr(heuristics, "CachingAutotuner", None)
    if autotuner_class is None:
        return []
    seen: set[int] = set()
    found = []
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, autotuner_class) and id(value) not in seen:
                seen.add(id(value))
                found.append(_inductor_kernel(value))
    return sorted(found, key=lambda kernel: (kernel["kernel"], kernel["source"]))


def _inductor_kernel(autotuner) -> dict:
    info = dict(getattr(autotuner, "autotune_cache_info", None) or {})
    state = info.get("autotune_cache_state")
    launchers = getattr(autotuner, "launchers", None) or []
    # Timing configs in this process (``autotune_to_one_config``) leaves its time beyond the precompile.
    spent_ns = getattr(autotuner, "autotune_time_taken_ns", 0) - getattr(autotuner, "precompile_time_taken_ns", 0)
    autotuned_here = len(launchers) == 1 and spent_ns > 0
    if autotuned_here and state in (None, "only 1 config"):
        state = UNCACHED
    if len(launchers) == 1:  # after its first call: the winner (or the only config)
        ran = config_dict(launchers[0].config)
    elif state == "hit":
        ran = dict(info["best_config"])
    elif state == "only 1 config":
        ran = dict(info["only_config"])
    else:  # never called in this process: no launcher chosen yet
        ran = None
    kernel = {
        "kind": "inductor",
        "kernel": autotuner.fn.__name__,
        "source": getattr(autotuner, "kernel_hash", "") or "",
        "found_by": state,
        "configs": _configs_offered(autotuner, info, state),
        "ran": ran,
    }
    if autotuned_here and state in ("miss", UNCACHED):  # how long timing its configs took (GPU work)
        kernel["benchmark_ms"] = round(spent_ns / 1e6, 3)
    return kernel


def _configs_offered(autotuner, info: dict, state: str | None) -> int | None:
    """How many configs the kernel had to choose from in this process: a miss's count as the cache lookup found it;
    one for a cache hit (the earlier choice replaced the list) or a single config. Precompiling empties the
    autotuner's own list (``configs = None``, torch 2.11), so it is counted only where no state says, from what is
    left of it; None where nothing is."""
    if "num_configs" in info:
        return info["num_configs"]
    if state == UNCACHED:  # Inductor keeps only the chosen one once it has chosen
        return None
    if state in ("hit", "only 1 config"):
        return 1
    left = getattr(autotuner, "configs", None) or getattr(autotuner, "compile_results", None) or []
    return len(left) or None


def triton_autotuners(candidate: ModuleType | None) -> list[dict]:
    """Each ``triton.autotune`` kernel among the candidate module's names, with its choice per key."""
    autotuner_module = sys.modules.get("triton.runtime.autotuner")
    autotuner_class = getattr(autotuner_module, "Autotuner", None)
    if candidate is None or autotuner_class is None:
        return []
    found = []
    for name, value in sorted(vars(candidate).items()):
        if isinstance(value, autotuner_class):
            found.append(
                {
                    "kind": "triton.autotune",
                    "kernel": name,
                    "configs": len(value.configs),
                    "ran": {repr(key): config_dict(config) for key, config in value.cache.items()},
                }
            )
    return found


def config_dict(config) -> dict:
    """A Triton config as plain JSON: its meta-parameters, warps and stages (and CTAs, registers where set)."""
    out = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
    if getattr(config, "num_ctas", 1) != 1:
        out["num_ctas"] = config.num_ctas
    if getattr(config, "maxnreg", None) is not None:
        out["maxnreg"] = config.maxnreg
    return out
