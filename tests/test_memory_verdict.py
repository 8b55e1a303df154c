"""Whose an out-of-memory error is (runner/worker/memory.py): the arithmetic and the parsing, on the CPU.

The GPU path (the readings of the device at the failure) runs only where CUDA fails to allocate; with
``executor.in_flight=8`` on the H100, 14 of 222 reference evaluations failed so and were blamed on the
candidate (BENCHMARKS.md, thirteenth session)."""

from __future__ import annotations

import pytest
import torch

from runner.worker import memory
from runner.worker.memory import CONTEXT_ALLOWANCE, asked_bytes, fits_alone, others_took_it, out_of_memory

GIB = 1 << 30
# The message torch gave on the H100 (f16, mul_broadcast_gate_fp16), shortened.
MESSAGE = (
    "CUDA out of memory. Tried to allocate 864.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
    "669.81 MiB is free. Process 1179 has 10.50 GiB memory in use."
)


def test_the_allocation_asked_for_is_read_off_torchs_message():
    assert asked_bytes(torch.OutOfMemoryError(MESSAGE)) == 864 << 20
    assert asked_bytes(torch.OutOfMemoryError("Tried to allocate 2.50 GiB. GPU 0")) == round(2.5 * GIB)
    assert asked_bytes(torch.OutOfMemoryError("out of memory")) is None


def test_an_allocation_that_fits_the_gpu_alone_is_the_others_fault():
    evidence = fits_alone(864 << 20, 5 * GIB, 79 * GIB, 73 * GIB)
    assert evidence and "would fit the GPU's 79.0 GiB" in evidence and "held 73.0 GiB" in evidence
    # Too large for the GPU even alone: the evaluation's own.
    assert fits_alone(10 * GIB, 70 * GIB, 79 * GIB, 5 * GIB) is None
    assert fits_alone(79 * GIB - CONTEXT_ALLOWANCE + 1, 0, 79 * GIB, 5 * GIB) is None
    # Nobody else held anything: the evaluation's own, whatever the sizes.
    assert fits_alone(1 * GIB, 1 * GIB, 79 * GIB, 0) is None


def test_the_error_is_found_behind_the_candidates_wrapping():
    oom = torch.OutOfMemoryError(MESSAGE)
    try:
        try:
            raise oom
        except torch.OutOfMemoryError as inner:
            raise RuntimeError("the candidate's forward failed") from inner
    except RuntimeError as wrapped:
        assert out_of_memory(wrapped) is oom
    assert out_of_memory(ValueError("no")) is None
    assert others_took_it(oom, torch.device("cpu")) is None  # no GPU readings on a CPU device


def test_cudas_own_out_of_memory_is_found_and_judged_only_before_the_candidate_ran():
    """f35: a reference's ``torch.randn`` failed with CUDA's own error (an ``AcceleratorError``, no size given)
    beside seven evaluations in flight, and the worker died of it (``harness_failed``). Now it is an
    out-of-memory error; of no stated size, it is the others' only where none of the candidate's code has run."""
    driver = RuntimeError("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in https://docs...")
    assert out_of_memory(driver) is driver and asked_bytes(driver) is None
    assert out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered")) is None
    evidence = fits_alone(None, 2 * GIB, 79 * GIB, 70 * GIB)
    assert evidence and evidence.startswith("an allocation of no stated size") and "held 70.0 GiB" in evidence
    assert fits_alone(None, 2 * GIB, 79 * GIB, 0) is None


# What the CUDA libraries said on the H100 when a first use found under 3 MiB free (BENCHMARKS.md, twentieth session).
CUBLAS = "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
CUDNN = "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"
CUSOLVER = "cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR, when calling `cusolverDnCreate(handle)`."
CUFFT = "cuFFT error: CUFFT_INTERNAL_ERROR"


def device_with_free_memory(monkeypatch, free: int) -> None:
    """A test double at the GPU's boundary (none here): CUDA initialised, ``free`` bytes free of 80 GiB."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *device: (free, 80 * GIB))


def test_a_librarys_allocation_failure_is_an_out_of_memory_error_of_no_stated_size():
    error = RuntimeError(CUBLAS)
    assert out_of_memory(error) is error and asked_bytes(error) is None
    assert out_of_memory(RuntimeError("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx`")) is None


@pytest.mark.parametrize("message", [CUDNN, CUSOLVER, CUFFT])
def test_a_librarys_internal_error_is_out_of_memory_only_on_a_nearly_full_device(monkeypatch, message):
    """cuDNN, cuSOLVER and cuFFT said only "internal error" where they could not allocate: taken for an
    allocation failure with under 1 GiB free when judged, and for what it says otherwise."""
    error = RuntimeError(message)
    assert out_of_memory(error) is None  # no CUDA here: nothing says the device was full
    device_with_free_memory(monkeypatch, 3 << 20)
    assert out_of_memory(error) is error
    device_with_free_memory(monkeypatch, memory.NEARLY_FULL_BYTES)
    assert out_of_memory(error) is None


@pytest.mark.parametrize("message", ["CUDA error: out of memory", CUBLAS])
def test_an_out_of_memory_error_in_kbenchs_own_steps_is_a_verdict_not_a_crash(tmp_path, monkeypatch, message):
    """CUDA's own out-of-memory error raised in the reference stage ends the evaluation with a verdict
    (``runtime_error`` / ``out_of_memory`` on this CPU machine, where no GPU reading can blame the others),
    not an exception out of the worker."""
    from runner.worker import correctness
    from runner.worker import evaluate as evaluate_module
    from runner.worker.protocol import TimingSettings
    from tests.conftest import in_process_job

    task = (
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
        "def get_inputs(n):\n    return [torch.randn(n)]\ndef get_init_inputs(n):\n    return []\n"
    )
    job = in_process_job(
        tmp_path,
        task,
        task.replace("class Model", "class ModelNew"),
        "double",
        {"small": {"n": 8}, "perf": {"n": 8}},
        TimingSettings(),
    )

    def refuse(*args, **kwargs):  # a test double at the GPU's boundary: the driver's error, on a CPU machine
        raise RuntimeError(message)

    monkeypatch.setattr(correctness, "float64_references", refuse)
    result = evaluate_module.evaluate(job, tmp_path)
    assert (result.verdict.status, result.verdict.reason, result.verdict.stage) == (
        "runtime_error",
        "out_of_memory",
        "reference",
    )
