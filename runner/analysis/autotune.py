"""Two compile caches' autotuning choices side by side: ``python -m runner.bench autotune CACHE_A CACHE_B``.

Inductor autotunes a Triton kernel that has several configs on its first call (pointwise ones too, by default) and
keeps the winner beside the kernel in the compile cache, a ``*.best_config`` file named from the kernel's source
and torch's version; the evaluation then runs that config. The timings that chose it were taken on the GPU of the
moment: beside the sweep, a warm-up autotunes beside other shared device work (BENCHMARKS.md, fortieth session),
so two cold compiles of the same candidates (``executor.compile_cache_dir``) may choose differently, and their
speedups differ by what the choice is worth. This compares the choices: the same file in both caches (the same
kernel source, the same torch) holds the same choice, or not. Timing fields (``TIMING_FIELDS``) are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

SUFFIX = ".best_config"
# What a best_config file records about the autotuning rather than the choice (torch/_inductor/runtime/
# autotune_cache.py): the time it took and the Triton cache's hash.
TIMING_FIELDS = ("time_taken_ms", "triton_cache_hash")
# How many differing choices are listed.
LISTED = 20


class NotACache(ValueError):
    """A path that is not a directory, or a best_config file that is not a JSON object."""


def choices(cache: Path) -> dict[str, dict]:
    """Every best_config file under ``cache``: its path relative to ``cache`` -> the choice it records."""
    if not cache.is_dir():
        raise NotACache(f"{cache} is not a directory")
    found = {}
    for path in sorted(cache.rglob(f"*{SUFFIX}")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise NotACache(f"{path}: not a readable best_config ({exc})") from None
        if not isinstance(data, dict):
            raise NotACache(f"{path}: not a best_config (a JSON object)")
        found[str(path.relative_to(cache))] = {k: v for k, v in data.items() if k not in TIMING_FIELDS}
    return found


def compare(cache_a: Path, cache_b: Path) -> dict:
    """How many kernels both caches autotuned, how many each alone, and how many of the shared ones chose
    differently (the first ``LISTED`` of them, with both choices)."""
    a, b = choices(cache_a), choices(cache_b)
    both = sorted(set(a) & set(b))
    different = [key for key in both if a[key] != b[key]]
    return {
        "caches": [str(cache_a), str(cache_b)],
        "both": len(both),
        "only_first": len(set(a) - set(b)),
        "only_second": len(set(b) - set(a)),
        "same": len(both) - len(different),
        "different": len(different),
        "differences": [{"file": key, "first": a[key], "second": b[key]} for key in different[:LISTED]],
    }


def ran_configs(record: dict | None) -> dict[str, object] | None:
    """What each autotuned kernel of a result's ``autotuning`` (``runner/worker/autotuning.py``) ran, by kernel (its
    kind, name and source hash): two evaluations of the same candidate ran its kernels alike where these are equal.
    None where the result has no record (one written before it was kept, or whose worker did not get that far)."""
    if not record or "kernels" not in record:
        return None
    return {f"{k['kind']}:{k['kernel']}:{k.get('source', '')}": k["ran"] for k in record["kernels"]}


# How two evaluations of one candidate ran its kernels (``kernels_alike``): the same configs, different ones, no
# kernel with configs in either (eager PyTorch, C++ from Inductor on the CPU), or a result without the record.
AUTOTUNING_STATES = ("same", "different", "no kernels", "not recorded")


def kernels_alike(first: dict | None, second: dict | None) -> str:
    """One of ``AUTOTUNING_STATES`` for two ``ran_configs``."""
    if first is None or second is None:
        return "not recorded"
    if not first and not second:
        return "no kernels"
    return "same" if first == second else "different"


def kernels_differing(first: dict, second: dict) -> list[str]:
    """The kernels two ``ran_configs`` ran differently, or that only one of them ran."""
    return sorted(key for key in set(first) | set(second) if first.get(key, ...) != second.get(key, ...))
