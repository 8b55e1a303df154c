"""What a spare worker pays before it knows its job: first-use costs in a process that no cache keeps.

torch.compile's: measured on the H100 (``cProfile`` of a worker's correctness stage, torch 2.11), a
torch.compile candidate's first call spent about 1.5 s of host time, GPU idle, on work that every
process repeats: importing ~130 inductor modules, hashing Triton's and torch's sources for the cache
keys, and registering the pattern matcher's replacement patterns. Inside the evaluation that time
holds the device's token and keeps a measurement waiting; in a spare it overlaps the evaluations
before it (quick suite: the correctness stage's median fell from 2.05 s to 1.26 s, BENCHMARKS.md,
seventh session). Every step here is host work: the patterns are traced under a fake tensor mode,
nothing is allocated on or launched to the GPU.

The output checks' (``fused_checks.py``): their Triton kernels compiled, or loaded from the checks'
own cache, host only; the job then loads one small module per kernel on first call (about 0.01 s
on the H100, against 0.3-0.5 s for PyTorch's ops the checks would otherwise use).

Each step is timed and recorded; one that this torch does not have, or that fails, is recorded as
not done, never an error.
"""

from __future__ import annotations

import importlib
import select
import time

import torch

from runner.worker import fused_checks

# The modules a torch.compile of CUDA code imports on its first call that ``torch._inductor.compile_fx``
# (which every spare imports) does not bring in already: the ones that cost a spare time on the
# H100 (the scheduler, the graph, the Triton codegen and the like came with compile_fx: 0.0 s each).
_MODULES = (
    "torch._dynamo.backends.inductor",
    "torch._inductor.codegen.cuda_combined_scheduling",
    "torch._inductor.fx_passes.fuse_attention",
    "torch._inductor.fx_passes.pad_mm",
    "torch.export._trace",
    "torch.fx.experimental.validator",
)

# What has been done in this process: {step: seconds, or "not done: why"}; copied into each result.
PREWARMED: dict = {}


def prewarm_compiler(device: torch.device | None) -> dict:
    """Pay torch.compile's per-process costs now; ``device``: the device the job will compile for
    (None: only the imports and torch's source key). Never raises: see ``_step``."""
    for name in _MODULES:
        _step(f"import {name}", lambda name=name: importlib.import_module(name))
    _step("torch_key", lambda: _codecache().torch_key())
    if device is None:
        return PREWARMED
    if device.type == "cuda":
        # Triton's source key and the GPU's description: the cache keys' system part (cached, as here).
        _step("system key", lambda: _codecache().CacheBase.get_system())

    # The arguments inductor passes, since its registration is cached on them (other ones would
    # register every pattern a second time): the inputs' device for the joint-graph patterns, none
    # for the post-grad ones.
    def joint_graph_patterns():
        from torch._inductor.fx_passes import joint_graph

        joint_graph.lazy_init(device)

    def post_grad_patterns():
        from torch._inductor.fx_passes import post_grad

        post_grad.lazy_init()

    _step("joint_graph patterns", joint_graph_patterns)
    _step("post_grad patterns", post_grad_patterns)
    return PREWARMED


def prewarm_checks() -> dict:
    """Compile (or load from the Triton cache) the output checks' kernels, host only (``fused_checks.prepare``)."""
    started = time.perf_counter()
    variants = fused_checks.prepare()
    failed = {name: why for name, why in variants.items() if not isinstance(why, float)}
    PREWARMED["fused checks"] = f"not done: {failed}"[:200] if failed else round(time.perf_counter() - started, 4)
    return PREWARMED


def job_waiting(stream) -> bool:
    """Whether a line (its job) is already waiting on ``stream``, a pipe nothing was read from yet. A spare
    handed its job as it starts (a run's first evaluations, each waiting for a worker) skips the pre-warm:
    then it would delay the job by seconds instead of overlapping the evaluations before it."""
    try:
        ready, _, _ = select.select([stream], [], [], 0)
    except (OSError, ValueError):
        return False
    return bool(ready)


def _codecache():
    from torch._inductor import codecache

    return codecache


def _step(name: str, action) -> None:
    """Runs one step and records its seconds, or why it did not run. A step that fails costs the job
    only the time it would have paid anyway: the pre-warm is a head start, never a precondition,
    so no failure here may take the spare down (each is in every result's ``spare_prewarm_s``)."""
    started = time.perf_counter()
    try:
        action()
    except Exception as exc:
        PREWARMED[name] = f"not done: {type(exc).__name__}: {exc}"[:200]
        return
    PREWARMED[name] = round(time.perf_counter() - started, 4)
