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
their Triton kernels compiled, or loaded from the checks' own cache, host only; the job then loads one
small module per kernel on first call (about 0.01 s on the H100, against 0.3-0.5 s for PyTorch's ops
the output checks would otherwise use).

The first uses on the device (``prewarm_device``, on a GPU where the executor asks for it,
``executor.spare_device_prewarm``): a fresh process pays CUDA's lazy module loading, cuBLAS's handles
and workspace, and the checks' kernels' first launch the first time it calls each, inside its first
shared phases, where a cohort of evaluations' chains decide how long the GPU measures nothing
(probe on the H100, seven fresh processes together: the reference stage 0.21 s, median, without;
0.11 s after these first uses: BENCHMARKS.md, twenty-first session). A spare makes them on small
tensors before its job, holding the device's token shared and entering like a newcomer (at the ready
gate), so in a gap between measurements, never beside one. A job that arrives meanwhile gets the
token as held (``job_token``): its first phases start in the same gap instead of queueing for the next.

Each step is timed and recorded; one that this torch does not have, or that fails, is recorded as
not done, never an error. ``start_spare`` runs it all in a worker started ahead of its job (imports,
on a GPU the CUDA context, then the pre-warm, skipped where the job is already waiting), and
``spare_record`` is what each result keeps of it.
"""

from __future__ import annotations

import importlib
import os
import select
import time

import torch

from runner.worker import fused_checks, fused_integrity
from runner.worker.compare import compare_outputs
from runner.worker.device_token import (
    DEVICE_PREWARM_ENV,
    ISOLATE_DEVICE,
    PREINIT_ENV,
    PREINIT_UNDER_TOKEN,
    SHARED,
    TOKEN_ENV,
    DeviceToken,
)
from runner.worker.integrity import call_violation, poison_allocator, snapshot_inputs

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
# The token record of the first uses on the device (``prewarm_device``), and the token itself while it is held
# for a job that arrived meanwhile (``job_token`` hands it over).
SPARE_DEVICE_TOKEN: dict = {}
_HELD_FOR_THE_JOB: list[DeviceToken] = []


def start_spare(stdin) -> None:
    """A worker's start before it reads its job from ``stdin``: the compiler stack's imports (seconds, paid
    before the job is known); on a GPU (the executor sets ``PREINIT_ENV``) its CUDA context, then the pre-warm,
    unless its job is already waiting: a worker handed its job as it starts (a run's first evaluations) lets
    the job go first, which then pays only the first uses it needs."""
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    preinit = os.environ.get(PREINIT_ENV)
    if preinit not in ("1", PREINIT_UNDER_TOKEN) or not torch.cuda.is_available():
        return
    _make_cuda_context(os.environ.get(TOKEN_ENV) if preinit == PREINIT_UNDER_TOKEN else None)
    if job_waiting(stdin):
        PREWARMED["skipped"] = "its job was waiting"
        return
    device = torch.device("cuda", torch.cuda.current_device())
    prewarm_compiler(device)
    prewarm_checks()
    if os.environ.get(DEVICE_PREWARM_ENV) == "1":
        prewarm_device(device, stdin, os.environ.get(TOKEN_ENV))


def spare_record() -> dict:
    """What this process paid before its job, for the result's environment."""
    record = {}
    if PREWARMED:
        record["spare_prewarm_s"] = dict(PREWARMED)
    if SPARE_CUDA_CONTEXT:
        record["spare_cuda_context"] = list(SPARE_CUDA_CONTEXT)
    if SPARE_CONTEXT_TOKEN:
        record["spare_cuda_context_token"] = dict(SPARE_CONTEXT_TOKEN)
    if SPARE_DEVICE_TOKEN:
        record["spare_device_token"] = dict(SPARE_DEVICE_TOKEN)
    return record


def _make_cuda_context(token_path: str | None) -> None:
    """Make this spare's CUDA context now rather than inside its job; with ``token_path``, holding the
    device's token shared, so not while a measurement runs (``executor.spare_context_under_token``)."""
    with DeviceToken(token_path, SPARE_CONTEXT_TOKEN) as token:
        token.hold(SHARED)
        started = time.time()
        torch.cuda.init()
        torch.empty(1, device="cuda:0")
        torch.cuda.synchronize()
        SPARE_CUDA_CONTEXT[:] = [started, time.time()]


def prewarm_device(device: torch.device, stdin, token_path: str | None) -> dict:
    """The first uses on ``device`` (``first_uses``) before the job, holding the token at ``token_path`` shared,
    entered as a newcomer enters (the ready gate): in a gap between measurements, never beside one. Skipped
    where the job came while the spare waited for the token; a job waiting when the token is held, or once the
    first uses are done, keeps it (``job_token``), else it is let go. Without a token, nothing runs: the first
    uses would run beside whatever measures."""
    if not token_path:
        PREWARMED["device first uses"] = "not done: no device token to hold"
        return PREWARMED
    token = DeviceToken(token_path, SPARE_DEVICE_TOKEN)
    token.hold(SHARED)
    if job_waiting(stdin):
        PREWARMED["device first uses"] = "not done: its job came while it waited for the device"
    else:
        _step("device first uses", lambda: first_uses(device))
    if job_waiting(stdin):
        SPARE_DEVICE_TOKEN["handed_to_the_job"] = True
        _HELD_FOR_THE_JOB[:] = [token]
    else:
        token.close()
    return PREWARMED


def first_uses(device: torch.device) -> None:
    """Call, on small tensors of each floating dtype, what nearly every evaluation calls first in its shared
    phases: the inputs' and parameters' generators, a GEMM with a bias (cuBLAS and cuBLASLt: handles, workspace,
    kernels), common elementwise, reduction and normalisation kernels, casts, and kbench's own checks on the
    device (snapshots, the allocator's poison, the inputs' comparison, the outputs' comparison). Lazy module
    loading makes each first call load its kernels' module; this process then holds them for its job.
    What it allocates is given back to the device."""
    with torch.device(device), torch.no_grad():
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = torch.randn(64, 64, dtype=dtype)
            w = torch.empty(64, 64, dtype=dtype).uniform_(-1, 1)
            y = torch.nn.functional.linear(x, w, w[0])
            outputs = [torch.softmax(x @ w, dim=-1) + torch.nn.functional.layer_norm(y, (64,)) * x, y.sum(0)]
            snapshots = snapshot_inputs([x, w])
            poison_allocator(outputs)
            call_violation([x, w], snapshots, outputs, [])
            compare_outputs(outputs, [output.clone() for output in outputs], None)
            outputs[0].float().double().sum()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    del x, w, y, outputs, snapshots
    if device.type == "cuda":
        torch.cuda.empty_cache()


def job_token(record: dict, isolation: str) -> DeviceToken:
    """The device token the job holds, recording into ``record``: the spare's, still held shared, where the job
    came while the spare made its first uses (the job's first phases then start in the same gap, not at the
    next); a new one otherwise (``TOKEN_ENV``). The spare's windows come first in ``record`` either way: this
    process held the device then."""
    if _HELD_FOR_THE_JOB:
        token = _HELD_FOR_THE_JOB.pop()
        if isolation == ISOLATE_DEVICE:
            record.update(token.record, windows=_spare_windows(), waited_s=0.0)
            token.record = record
            return token
        token.close()  # under another isolation the job's shared phases take no lock: this one must not stay
    token = DeviceToken(os.environ.get(TOKEN_ENV), record, isolation)
    if "windows" in record:
        record["windows"][:0] = _spare_windows()
    return token


def _spare_windows() -> list[list]:
    """Copies of the windows the spare held the token in for its first uses on the device."""
    return [list(window) for window in SPARE_DEVICE_TOKEN.get("windows", [])]


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
    """Compile (or load from the checks' own Triton cache) the output checks' kernels and the integrity
    checks', host only (``fused_checks.prepare``, ``fused_integrity.prepare``); each is recorded apart."""
    for step, prepare in (("fused checks", fused_checks.prepare), ("fused integrity checks", fused_integrity.prepare)):
        started = time.perf_counter()
        failed = fused_checks.failed_variants(prepare())
        PREWARMED[step] = f"not done: {failed}"[:200] if failed else round(time.perf_counter() - started, 4)
    return PREWARMED


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
