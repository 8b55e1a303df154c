"""What a spare worker pays before it knows its job: first-use costs in a process that no cache keeps.

torch.compile's: measured on the H100 (``cProfile`` of a worker's correctness stage, torch 2.11), a
torch.compile candidate's first call spent about 1.5 s of host time, GPU idle, on work that every
process repeats: importing ~130 inductor modules, hashing Triton's and torch's sources for the cache
keys, and registering the pattern matcher's replacement patterns. Inside the evaluation that time
holds the device's token and keeps a measurement waiting; in a spare it overlaps the evaluations
before it (quick suite: the correctness stage's median fell from 2.05 s to 1.26 s, BENCHMARKS.md,
seventh session). Every step here is host work: the patterns are traced under a fake tensor mode,
nothing is allocated on or launched to the GPU.

The output checks' (``fused_checks.py``) and the per-call integrity checks' (``fused_integrity.py``):
their Triton kernels compiled, or loaded from the checks' own cache, and their modules loaded into the
spare's CUDA context (no launch), so the job's first call of each only launches it (a module load took
about 0.01 s of the job's first shared phase on the H100; PyTorch's ops, which the output checks would
otherwise use, 0.3-0.5 s).

The kernel census's (``kernel_census.py``): the CUDA profiler started and stopped once, recording nothing.
Its first start in a process (CUPTI's and Kineto's set-up) took 60 ms (median) of the census inside the
correctness stage; after the spare's, 1.6 ms (BENCHMARKS.md, twenty-fifth session).

Triton's source key (``triton_key_beside``): hashed once by the fork server, in a thread beside its imports, so that
no forked worker pays it (0.4-0.5 s in each of a run's first workers on the H200, inside their check kernels' load).

Each step is timed and recorded; one that this torch does not have, or that fails, is recorded as
not done, never an error. ``start_spare`` runs it all in a worker started ahead of its job (imports,
on a GPU the CUDA context, then the pre-warm, skipped where the job is already waiting, except a load of the
check kernels that an earlier process compiled into their cache), and ``spare_record`` is what each result
keeps of it. The same record goes to the file ``SPARE_RECORD_ENV`` names once the start is done
(``write_spare_record``), for the spares a run dismisses without a job: their contexts and pre-warms ran beside the
run's measurements as much as any other's (a run's last spares, and in a short run every one: the executor starts
``prestart`` of them as its first evaluations start), and the executor keeps their records in the run
(``executors.base.SPARES_LOG``) for ``runner.bench disturbed``.
"""

from __future__ import annotations

import importlib
import os
import select
import threading
import time
from pathlib import Path

import torch

from runner.worker import fused_checks, fused_integrity
from runner.worker.device_token import (
    PREINIT_ENV,
    PREINIT_UNDER_TOKEN,
    SHARED,
    TOKEN_ENV,
    DeviceToken,
    one_context_at_a_time,
)
from runner.worker.protocol import CHECKS_CACHE_ENV, SPARE_RECORD_ENV, write_json_atomic

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
# When this process, a spare, made its CUDA context ([start, end], epoch seconds): outside the device token
# unless ``executor.spare_context_under_token``, so possibly during another evaluation's measurement
# (runner/analysis/disturbances.py checks).
SPARE_CUDA_CONTEXT: list[float] = []
# The token record of that, where it was made holding the device token (how long it waited for it).
SPARE_CONTEXT_TOKEN: dict = {}
# The device's context lock around it (``device_token.one_context_at_a_time``): how long it waited for the other
# workers' contexts, and when it held the lock.
SPARE_CONTEXT_LOCK: dict = {}
# When this spare pre-warmed after its context ([start, end], epoch seconds): the compiler's steps (host work), the
# check kernels' compile or load into its context, and the profiler's start and stop (CUPTI's set-up); off the token,
# so possibly during another evaluation's measurement. Where its job was waiting, the check kernels' load alone.
PREWARM_WINDOW: list[float] = []


def start_spare(stdin) -> None:
    """A worker's start before it reads its job from ``stdin``: the compiler stack's imports (seconds, paid
    before the job is known); on a GPU (the executor sets ``PREINIT_ENV``) its CUDA context, then the pre-warm,
    unless its job is already waiting: a worker handed its job as it starts (a run's first evaluations) lets
    the job go first, which then pays only the first uses it needs; it still loads the check kernels where an
    earlier process compiled them into the checks' cache (a later run over the same ``compile_cache_dir``)."""
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    preinit = os.environ.get(PREINIT_ENV)
    if preinit not in ("1", PREINIT_UNDER_TOKEN) or not torch.cuda.is_available():
        return
    _make_cuda_context(os.environ.get(TOKEN_ENV) if preinit == PREINIT_UNDER_TOKEN else None)
    started = time.time()
    if job_waiting(stdin):
        PREWARMED["skipped"] = "its job was waiting"
        # The check kernels, where an earlier process compiled them into their cache: a load (0.4-0.5 s in f50's first
        # cohort), where the PyTorch ops they replace cost the first cohort's correctness stages about a second
        # (BENCHMARKS.md, twenty-fourth session); a compile (seconds) is left out, as before.
        if checks_compiled_in_cache():
            prewarm_checks()
            PREWARM_WINDOW[:] = [started, time.time()]
    else:
        prewarm_compiler(torch.device("cuda", torch.cuda.current_device()))
        prewarm_checks()
        prewarm_profiler()
        PREWARM_WINDOW[:] = [started, time.time()]


def spare_record() -> dict:
    """What this process paid before its job, for the result's environment."""
    record = {}
    if PREWARMED:
        record["spare_prewarm_s"] = dict(PREWARMED)
    if SPARE_CUDA_CONTEXT:
        record["spare_cuda_context"] = list(SPARE_CUDA_CONTEXT)
    if SPARE_CONTEXT_TOKEN:
        record["spare_cuda_context_token"] = dict(SPARE_CONTEXT_TOKEN)
    if SPARE_CONTEXT_LOCK:
        record["spare_cuda_context_lock"] = dict(SPARE_CONTEXT_LOCK)
    if PREWARM_WINDOW:
        record["spare_prewarm_window"] = list(PREWARM_WINDOW)
    return record


def write_spare_record() -> None:
    """This spare's start, done (``spare_record``, its pid and when it was ready for a job), into the file
    ``SPARE_RECORD_ENV`` names, where it does: one small JSON object, written whole (``write_json_atomic``). A record
    is for the run's account, never a precondition: a failure to write it is ignored."""
    path = os.environ.get(SPARE_RECORD_ENV)
    if not path:
        return
    try:
        write_json_atomic(Path(path), {"pid": os.getpid(), "ready_at": time.time(), **spare_record()})
    except OSError:
        pass


def _make_cuda_context(token_path: str | None) -> None:
    """Make this spare's CUDA context now rather than inside its job, when the device's other workers have made
    theirs (``one_context_at_a_time``: the first worker of a run has its context first); with ``token_path``,
    holding the device's token shared, so not while a measurement runs (``executor.spare_context_under_token``).
    The context lock is taken first and the token inside it: a worker holding the token never waits for the lock
    (a measurement that waits for the token's shared holders could otherwise wait for the lock's queue)."""
    with one_context_at_a_time(os.environ.get(TOKEN_ENV), SPARE_CONTEXT_LOCK):
        with DeviceToken(token_path, SPARE_CONTEXT_TOKEN) as token:
            token.hold(SHARED)
            started = time.time()
            torch.cuda.init()
            torch.empty(1, device="cuda:0")
            torch.cuda.synchronize()
            SPARE_CUDA_CONTEXT[:] = [started, time.time()]


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


def triton_key_beside() -> threading.Thread | None:
    """Start computing Triton's source key (its cache's version part) in a thread, for the fork server to join before
    it forks: every worker forked after that finds the key cached for the life of its process, as inductor's compile
    pool does (``async_compile.pre_fork_setup``). The key hashes Triton's compiler sources and ``libtriton.so`` (about
    500 MB), host work only; the first check kernel a process loads computes it, or inductor's "system key" step. On
    the H200 it took each of a run's first eight workers 0.4-0.5 s on the way to their jobs (their check kernels loaded
    in 0.49-0.61 s, a spare's in 0.09-0.11 s once that step had paid it; in 0.09-0.10 s with the key hashed here;
    BENCHMARKS.md, fiftieth session). The hashing and the reading release the GIL, so the thread runs beside the
    compiler stack's imports: the server's imports took 3.98 s with it, 4.13 s without (two H200 machines). Recorded as
    ``triton key`` (the thread's seconds, or why not done); None where Triton is missing."""
    try:
        try:
            from triton.runtime.cache import triton_key
        except ImportError:  # older Tritons define it in their compiler
            from triton.compiler.compiler import triton_key
    except ImportError as exc:
        PREWARMED["triton key"] = f"not done: {type(exc).__name__}: {exc}"[:200]
        return None
    thread = threading.Thread(target=_step, args=("triton key", triton_key), name="triton key", daemon=True)
    thread.start()
    return thread


def prewarm_checks() -> dict:
    """Compile (or load from the checks' own Triton cache) the output checks' kernels and the integrity
    checks', and load their modules (``fused_checks.prepare``, ``fused_integrity.prepare``); each is recorded
    apart. Where both are ready, the checks' cache is marked as holding them (``fused_checks.compiled_marker``)."""
    all_ready = True
    for step, prepare in (("fused checks", fused_checks.prepare), ("fused integrity checks", fused_integrity.prepare)):
        started = time.perf_counter()
        failed = fused_checks.failed_variants(prepare())
        all_ready = all_ready and not failed
        PREWARMED[step] = f"not done: {failed}"[:200] if failed else round(time.perf_counter() - started, 4)
    marker = _compiled_marker() if all_ready else None
    if marker is not None:
        try:
            marker.touch()
        except OSError as exc:  # a head start for later processes, never a precondition
            PREWARMED["checks cache marked"] = f"not done: {exc}"[:200]
    return PREWARMED


def prewarm_profiler() -> dict:
    """Start and stop the CUDA profiler once, recording nothing, so the kernel census's start inside the job
    (``kernel_census.py``) is not the process's first: that one sets up CUPTI and Kineto (60 ms, median, in a
    quick suite on an H200). Recorded as ``profiler``; without a CUDA device, not done."""
    if not torch.cuda.is_available():
        PREWARMED["profiler"] = "not done: no CUDA device"
        return PREWARMED

    def start_and_stop():
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]):
            pass

    _step("profiler", start_and_stop)
    return PREWARMED


def checks_compiled_in_cache() -> bool:
    """Whether an earlier process prepared every check kernel in the checks' cache for this GPU (``prewarm_checks``)."""
    marker = _compiled_marker()
    return marker is not None and marker.exists()


def _compiled_marker():
    if not torch.cuda.is_available():
        return None
    return fused_checks.compiled_marker(os.environ.get(CHECKS_CACHE_ENV), torch.cuda.get_device_capability())


def job_waiting(stream) -> bool:
    """Whether a line (its job) is already waiting on ``stream``, a pipe nothing was read from yet. A spare
    handed its job as it starts skips the pre-warm: then it would delay the job by seconds instead of
    overlapping the evaluations before it."""
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
