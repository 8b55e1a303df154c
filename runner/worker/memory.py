"""Whose an out-of-memory error on the GPU is: the evaluation's own, or the other processes' on the device.

With several evaluations in flight on one GPU (``executor.in_flight``) each holds its inputs and
outputs while it waits for its measurement's turn, and every spare holds a CUDA context, so an
allocation that would fit on the GPU alone can fail because the others hold the rest. That is not
the candidate's failure: with ``in_flight=8`` on the H100, 14 of 222 reference evaluations ended
out of memory and were reported as the candidate's ``runtime_error`` (BENCHMARKS.md, thirteenth
session). Judged where it fails, from the allocation torch says it asked for, the memory this
process's allocator holds and the device's capacity. Failures of no stated size (CUDA's own, the CUDA
libraries' creating a handle) are judged only where none of the candidate's code has run.
"""

from __future__ import annotations

import re

import torch

# torch's message: "CUDA out of memory. Tried to allocate 864.00 MiB. GPU 0 has a total capacity of ..."
_ASKED = re.compile(r"Tried to allocate ([0-9]+(?:\.[0-9]+)?) (B|KiB|MiB|GiB|TiB)")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
# What a process holds on the GPU besides its allocator's memory (a CUDA context: 0.52 GiB on the H100,
# BENCHMARKS.md, thirteenth session), with room to spare.
CONTEXT_ALLOWANCE = 1 << 30


def causes(exc: BaseException | None):
    """``exc``, then the exception it was raised from (or while handling), and so on."""
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


# Allocation failures of no stated size: CUDA's own (cudaErrorMemoryAllocation, raised by torch as an
# ``AcceleratorError``, a ``RuntimeError``) where the driver, not torch's allocator, ran out (f35: a reference's
# ``torch.randn`` beside seven others in flight), and the CUDA libraries' creating a handle or a plan. On the
# H100 with under 3 MiB free (BENCHMARKS.md, twentieth session) a first matmul failed with
# "CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`".
_ALLOCATION_FAILED = (
    "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_ALLOC_FAILED",
    "CUSOLVER_STATUS_ALLOC_FAILED",
    "CUSPARSE_STATUS_ALLOC_FAILED",
    "CUFFT_ALLOC_FAILED",
)
# What cuDNN, cuSOLVER and cuFFT said there instead: only "internal error" (a first conv2d, a first
# ``linalg.solve``, a first ``fft``). Taken for an allocation failure only where the device has under
# ``NEARLY_FULL_BYTES`` free when the error is judged; elsewhere it stays whatever else it is.
_INTERNAL_ERROR = ("CUDNN_STATUS_INTERNAL_ERROR", "CUSOLVER_STATUS_INTERNAL_ERROR", "CUFFT_INTERNAL_ERROR")
NEARLY_FULL_BYTES = 1 << 30


def _nearly_full() -> bool:
    """Whether the current CUDA device has under ``NEARLY_FULL_BYTES`` free now (False without CUDA)."""
    try:
        return torch.cuda.is_initialized() and torch.cuda.mem_get_info()[0] < NEARLY_FULL_BYTES
    except RuntimeError:
        return False


def _no_size_allocation_failure(error: BaseException) -> bool:
    if not isinstance(error, RuntimeError):
        return False
    text = str(error)
    return any(marker in text for marker in _ALLOCATION_FAILED) or (
        any(marker in text for marker in _INTERNAL_ERROR) and _nearly_full()
    )


def out_of_memory(exc: BaseException | None) -> BaseException | None:
    """The ``torch.OutOfMemoryError`` (or an allocation failure of no stated size: CUDA's own, a library's) in
    ``exc``'s chain of causes, or None."""
    return next(
        (
            error
            for error in causes(exc)
            if isinstance(error, torch.OutOfMemoryError) or _no_size_allocation_failure(error)
        ),
        None,
    )


def asked_bytes(error: BaseException) -> int | None:
    """The allocation that failed, from torch's message; None where the message does not say."""
    match = _ASKED.search(str(error))
    return round(float(match[1]) * _UNITS[match[2]]) if match else None


def fits_alone(asked: int | None, own: int, total: int, others: int) -> str | None:
    """Evidence that ``asked`` bytes, with the ``own`` this process holds, would have fit a device of
    ``total`` bytes had the ``others`` not held theirs; None where it would not have (the evaluation's own).
    ``asked`` None: an allocation of no stated size (the driver's own), judged as one that needs no more."""
    if others <= 0 or own + (asked or 0) + CONTEXT_ALLOWANCE > total:
        return None
    gib = 1 << 30
    what = "an allocation of no stated size" if asked is None else f"{asked / gib:.2f} GiB asked"
    return (
        f"{what} while this evaluation held {own / gib:.2f} GiB would fit the GPU's "
        f"{total / gib:.1f} GiB; other processes on it held {others / gib:.1f} GiB"
    )


def others_took_it(exc: BaseException, device: torch.device, candidate_ran: bool = True) -> str | None:
    """Evidence that the out-of-memory error in ``exc`` is the other processes' on ``device``, or None. An error
    of no stated size is judged only where no code of the candidate has run (``candidate_ran`` False): memory
    it took past torch's allocator would count as the others'."""
    error = out_of_memory(exc)
    if error is None or device.type != "cuda":
        return None
    asked = asked_bytes(error)
    if asked is None and candidate_ran:
        return None
    try:
        own = torch.cuda.memory_reserved(device)
        total = torch.cuda.get_device_properties(device).total_memory
        free, _ = torch.cuda.mem_get_info(device)
    except RuntimeError:
        return None
    return fits_alone(asked, own, total, total - free - own - CONTEXT_ALLOWANCE)
