"""The output comparison and the float64 error as one Triton kernel each, for CUDA tensors.

Why: in a fresh process every distinct PyTorch kernel loads its module on first call, and the
comparison (``compare.py``) and the float64 error (``precision.py``) touch about fifteen of them
(casts, ``isnan``, ``abs``, ``masked_fill_``, reductions in int64 and float64, ...). Measured on the
H100 (BENCHMARKS.md, ninth session): the first comparison of a float32 output in a new process took
0.29-0.47 s and the first float64 error 0.07-0.16 s, most of an evaluation's shared device time,
where the second call takes about a millisecond. A Triton kernel is one small module.

Same arithmetic as the PyTorch paths, elementwise: the comparison works in float64 for float32 and
float64 outputs and in float32 for 16-bit ones (``compare._working_dtype``), with the tolerances cast
the way PyTorch casts a Python scalar for that dtype; its counts are exact (integer atomics) and its
maxima are the same values (max is order-free; non-negative floats compare like their bit patterns).
The float64 error's two sums are taken per block and then summed in one fixed order, so a call
returns the same bits every time; they may differ from ``torch.sum``'s last bits (another order).

``available(tensor)`` says where these apply: CUDA floating tensors (complex and integer outputs keep
the PyTorch paths) in a process whose ``prepare()`` compiled the usual variants ahead of its job
and loaded them into its CUDA context, launching nothing (a spare's head start, ``prewarm.py``); elsewhere
the PyTorch paths serve.

The kernels are compiled into and loaded from their own directory, ``KBENCH_CHECKS_CACHE`` (set by the
executors: ``checks/`` beside the run's compile caches for ``local``, the container's private ``/tmp`` for ``docker``),
never the candidates' Triton cache: a candidate that wrote into its compile cache (shared by the
evaluations of a run) could otherwise replace the kernels that judge the ones after it.

Besides the output checks, this module owns what the per-call integrity checks' kernels
(``fused_integrity.py``) share with them, so that both follow the same rules: ``kernels_module`` (the
Triton kernels, or None without Triton), ``checks_cache`` (Triton's cache is the checks' own while a
check kernel compiles or loads), ``warm_variants`` (a ``prepare``'s compile and module loads, no launch) and
``failed_variants`` (the one verdict on whether a ``prepare`` compiled every variant).
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from runner.worker.host_reads import Later
from runner.worker.protocol import CHECKS_CACHE_ENV

_BLOCK = 1024
TINY = 1e-30  # the relative error's smallest denominator, as in compare._queue_counts
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# The comparison's result slots: NaN-pattern, infinity and tolerance mismatches, then the abs and
# relative maxima as float64 bit patterns.
_SLOTS = 5
_TOLERANCE_AT = 6  # where the tolerances follow the slots in the one buffer copied over: 48 bytes in
# No fused multiply-adds: PyTorch rounds a product and a sum separately (``fused_kernels.py``).
_ROUNDING = {"enable_fp_fusion": False}


# Whether this process prepared every variant (``prepare``; a spare does, before its job). Unprepared,
# the first call pays Triton's start-up inside the job: 0.5 s with the kernels in the cache, 1.7-2.4 s
# compiling them (H100), more than PyTorch's ops cost a fresh process (0.3-0.5 s); such a process
# (a worker started for its job, ``executor.prestart=0``) keeps the PyTorch paths.
_prepared = False


def available(tensor: torch.Tensor) -> bool:
    """Whether the fused kernels judge ``tensor``: a CUDA tensor of a real floating dtype, in a process
    that prepared them."""
    return _prepared and tensor.is_cuda and tensor.dtype in _FLOATS


@functools.cache
def kernels_module():
    """The kernels' module, or None where Triton cannot be imported (the PyTorch paths serve)."""
    try:
        from runner.worker import fused_kernels
    except ImportError:
        return None
    return fused_kernels


def queue_compare_counts(ref: torch.Tensor, got: torch.Tensor, atol: float, rtol: float):
    """``(nan_mismatches, inf_mismatches, outside_tolerance, max_abs_error, max_rel_error)`` of two same-shape,
    same-dtype CUDA floating tensors: the device work queued now; returns the call that reads the result, one read
    from the device (``host_reads.Later``: without a wait once the device has passed it)."""
    ref_flat, got_flat = ref.reshape(-1).contiguous(), got.reshape(-1).contiguous()
    n = ref_flat.numel()
    # The zeroed result slots and the tolerances, one copy from the host (no fill kernel to load); from pinned
    # memory, so the copy waits for nothing queued before it; the tolerances 16 bytes aligned, as the variants expect.
    staged = torch.zeros(_TOLERANCE_AT + 3, dtype=torch.int64, pin_memory=ref.is_cuda)
    staged[_TOLERANCE_AT:] = torch.tensor([atol, rtol, TINY], dtype=torch.float64).view(torch.int64)
    staged = staged.to(ref.device, non_blocking=True)
    out, tolerance = staged[:_SLOTS], staged[_TOLERANCE_AT:].view(torch.float64)
    if n:
        grid = (-(-n // _BLOCK),)
        with checks_cache():
            kernels_module().compare_kernel[grid](
                ref_flat, got_flat, n, tolerance, out, WORK_FP64=_works_in_fp64(ref.dtype), BLOCK=_BLOCK, **_ROUNDING
            )
    later = Later(out)

    def read() -> tuple[int, int, int, float, float]:
        nan_mismatch, inf_mismatch, outside, max_abs, max_rel = later.tolist()
        return nan_mismatch, inf_mismatch, outside, _as_float(max_abs), _as_float(max_rel)

    return read


def squared_sums(value: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """``(sum((v - r)^2), sum(r^2))`` in float64 over the elements finite in both; one read from the device."""
    v, r = value.detach().reshape(-1).contiguous(), reference.detach().reshape(-1).contiguous()
    n = r.numel()
    blocks = max(1, -(-n // _BLOCK))
    # Every block writes its own pair (no fill kernel); with no element there is no block, and one zero pair.
    partial = (
        torch.empty(2 * blocks, dtype=torch.float64, device=r.device)
        if n
        else torch.zeros(2, dtype=torch.float64).to(r.device)
    )
    out = torch.empty(2, dtype=torch.float64, device=r.device)
    with checks_cache():
        if n:
            kernels_module().squared_sums_kernel[(blocks,)](v, r, n, partial, BLOCK=_BLOCK, **_ROUNDING)
        kernels_module().sum_pairs_kernel[(1,)](partial, blocks, out, BLOCK=_BLOCK, **_ROUNDING)
    squared_error, squared_norm = out.tolist()
    return squared_error, squared_norm


def prepare() -> dict:
    """Compile (or load from Triton's cache) and load into the CUDA context, launching nothing, the variants
    an evaluation usually needs: the comparison for each floating dtype, the float64 error of float32 and
    float64 values. Returns
    ``{variant: seconds}``; a variant that fails is recorded, never raised, and leaves this process on
    the PyTorch paths (``available`` is true only once every variant compiled)."""
    kernels = kernels_module()
    if kernels is None or not torch.cuda.is_available():
        return {"not done": "no Triton or no CUDA device"}
    options = {"BLOCK": _BLOCK, **_ROUNDING}
    variants = [
        (
            f"compare {str(dtype)[6:]}",
            kernels.compare_kernel,
            (dtype, dtype, _BLOCK, torch.float64, torch.int64),
            {"WORK_FP64": _works_in_fp64(dtype), **options},
        )
        for dtype in _FLOATS
    ]
    variants += [
        (
            f"squared sums {str(dtype)[6:]}",
            kernels.squared_sums_kernel,
            (dtype, torch.float64, _BLOCK, torch.float64),
            options,
        )
        for dtype in (torch.float32, torch.float64)
    ]
    variants.append(("sum pairs", kernels.sum_pairs_kernel, (torch.float64, 2, torch.float64), options))
    done = warm_variants(variants)
    global _prepared
    _prepared = not failed_variants(done)
    return done


def warm_variants(variants: list) -> dict:
    """Compile (or load from the checks' own cache) each ``(name, kernel, args, options)`` on the host, as its
    calls will launch it (``args``: a torch dtype for a tensor, a value otherwise), and load its module into this
    process's CUDA context where there is one (``load_into_context``; nothing is launched). Returns
    ``{name: seconds}``; one that fails is recorded as not done, never raised."""
    done: dict = {}
    for name, kernel, args, options in variants:
        started = time.perf_counter()
        try:
            with checks_cache():
                load_into_context(kernel.warmup(*args, **options, grid=(1,)))
        except Exception as exc:
            done[name] = f"not done: {type(exc).__name__}: {exc}"[:200]
            continue
        done[name] = round(time.perf_counter() - started, 4)
    return done


def load_into_context(compiled) -> bool:
    """Load a compiled kernel's module into this process's CUDA context now, where it has one: a module load
    (the driver copies the code to the device), no launch. The job's first call of the kernel then only
    launches it; loaded there, each check kernel's first call took about 0.01 s of a first shared phase, beside
    the other evaluations' (prewarm.py). Returns whether it was loaded (a Triton without the step: not)."""
    load = getattr(compiled, "_init_handles", None)
    if load is None or not torch.cuda.is_initialized():
        return False
    load()
    return True


def compiled_marker(cache: str | None, capability: tuple[int, int]) -> Path | None:
    """The file that says the checks' own cache (``cache``, ``KBENCH_CHECKS_CACHE``) holds every variant of both
    ``prepare``s as this Triton compiled them for a GPU of ``capability`` from these kernels, these launch options
    (their three modules' sources) and this CUDA; written by the process that prepared them all there (``prewarm.py``).
    A process that finds it loads them (0.06-0.5 s on the H100, the most where a run's first evaluations load them
    together) rather than compiling them (about 2.4 s). None where the checks have no cache of their own or no
    Triton: no later process can find them."""
    kernels = kernels_module()
    if not cache or kernels is None:
        return None
    import triton

    digest = hashlib.sha256()
    for name in ("fused_kernels.py", "fused_checks.py", "fused_integrity.py"):
        digest.update(Path(__file__).with_name(name).read_bytes())
    digest.update(f"triton {triton.__version__} cuda {torch.version.cuda} sm_{capability[0]}{capability[1]}".encode())
    return Path(cache) / f"prepared-{digest.hexdigest()[:20]}"


def failed_variants(done: dict) -> dict:
    """The entries of ``done`` (a ``prepare``'s ``{variant: seconds}``) that are not seconds, ``{name: why}``:
    empty only where every variant compiled."""
    return {name: why for name, why in done.items() if not isinstance(why, float)}


def _works_in_fp64(dtype: torch.dtype) -> bool:
    """Whether the comparison of ``dtype`` works in float64 (float32 and float64; the 16-bit ones in
    float32), as ``compare._working_dtype`` chooses for the PyTorch path."""
    return dtype in (torch.float32, torch.float64)


@contextmanager
def checks_cache():
    """Triton's cache directory is ``KBENCH_CHECKS_CACHE`` while a check kernel compiles or loads (Triton
    reads ``TRITON_CACHE_DIR`` at each compile); unchanged where the variable is not set."""
    where = os.environ.get(CHECKS_CACHE_ENV)
    if not where:
        yield
        return
    saved = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = where
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved


def _as_float(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]
