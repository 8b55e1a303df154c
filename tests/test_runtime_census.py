"""The runtime censuses on their own: thread attribution, kernel-name classification, the records.

The worker-level behaviour (verdicts, records in result.json) is covered by the adversarial
corpora; here are the parts that a CPU cannot reach through a run: the CUDA profiler's kernel
names and events (fed in as recorded), and threads started from each kind of code.
"""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
import torch

from runner.worker.integrity import ThreadCensus
from runner.worker.kernel_census import KernelCensus, defined_kernels
from runner.worker.loading import import_file
from tests.conftest import kbench, result_records

SOURCE = '''
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline

CUDA_SRC = """
__global__ void scale_kernel(const float* x, float* y, int n) { }
extern "C" __global__ __launch_bounds__(256) void shift_kernel(float* y) { }
__global__ void __launch_bounds__(128) bounded(float* y) { }
"""
ext = load_inline(name="ext", cpp_sources="", cuda_sources=CUDA_SRC)


@triton.jit
def _add_kernel(x_ptr, n):
    pass
'''


def _census(method: str = "directory", source: str = SOURCE) -> KernelCensus:
    return KernelCensus(source, "candidate.py", torch.device("cuda"), "own_kernels", method)


def test_defined_kernels_are_read_from_the_source():
    defined = defined_kernels(SOURCE)
    assert defined.triton == {"_add_kernel"} and defined.cuda == {"scale_kernel", "shift_kernel", "bounded"}
    assert defined.non_triton and not defined.unreadable


def test_kernels_without_spelled_out_names_are_unreadable():
    numba = "from numba import cuda\n\n@cuda.jit\ndef axpy(a, x, y):\n    pass\n"
    assert defined_kernels(numba).cuda == {"axpy"} and not defined_kernels(numba).unreadable
    cupy = "import cupy\nk = cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = x', 'copy')\n"
    assert defined_kernels(cupy).unreadable
    built = "from torch.utils.cpp_extension import load_inline\next = load_inline('e', cuda_sources=SRC)\n"
    assert defined_kernels(built).unreadable and defined_kernels(built).non_triton


@pytest.mark.parametrize(
    ("name", "own"),
    [
        ("_add_kernel", True),
        ("_add_kernel_0d1d2de", True),  # older Triton's specialisation suffix
        ("_add_kernel_fused", False),
        ("scale_kernel(float const*, float*, int)", True),
        ("void scale_kernel<float>(float const*, float*, int)", True),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, ...)", False),
        ("void at::native::(anonymous namespace)::elementwise_kernel<128, 4>(int, ...)", False),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_cublas", False),
        ("triton_poi_fused_relu_0", False),  # Inductor's, not a directory candidate's
        (
            "cudapy::__main__::scale_kernel[abi:v1,cw51cXTLSUwv1sCUt9Uw1VEw0NRRQPKz](Array<float, 1, C, mutable, aligned>)",
            True,
        ),
    ],
)
def test_kernel_names_are_classified(name, own):
    assert _census().is_own(name) is own


def test_inductor_kernels_are_torch_compiles_own():
    census = _census("torch_compile", "")
    assert census.is_own("triton_poi_fused_relu_0") and census.is_own("triton_red_fused_sum_1")
    assert not census.is_own("triton") and not census.is_own("void at::native::reduce_kernel<512, 1>(...)")


def _event(name: str, us: float, activity: str = "kernel", device=torch.autograd.DeviceType.CUDA):
    time_range = SimpleNamespace(elapsed_us=lambda: us)
    return SimpleNamespace(name=name, device_type=device, activity_type=activity, time_range=time_range)


def test_profile_with_only_library_kernels_is_a_violation_under_own_kernels():
    census = _census()
    census._judge_profile(
        [
            _event("aten::mm", 50.0, "cpu_op", torch.autograd.DeviceType.CPU),
            _event("sm90_xmma_gemm_f32f32", 30.0),
            _event("void at::native::vectorized_elementwise_kernel<4>(int)", 10.0),
            _event("Memcpy HtoD (Pageable -> Device)", 5.0, "gpu_memcpy"),
            _event("## forward ##", 40.0, "gpu_user_annotation"),
        ]
    )
    record = census.record
    assert record["own"] == {} and len(record["library"]) == 2 and record["copies"] == 1
    assert record["library_gpu_us"] == 40.0 and record["own_gpu_share"] == 0.0 and record["judged"]
    reason, evidence = census.violation()
    assert reason == "no_own_kernel_ran" and "sm90_xmma_gemm_f32f32" in evidence and "_add_kernel" in evidence
    assert census.violation() is None  # reported once


def test_profile_with_an_own_kernel_records_its_share():
    census = _census()
    census._judge_profile([_event("_add_kernel", 30.0), _event("void at::native::fill_kernel<float>(int)", 10.0)])
    assert census.record["own"] == {"_add_kernel": 1} and census.record["own_gpu_share"] == 0.75
    assert census.violation() is None and census.record["own_kernel_ran"] is True


def test_profile_without_any_device_activity_decides_nothing():
    census = _census()
    census._judge_profile([_event("aten::mm", 50.0, "cpu_op", torch.autograd.DeviceType.CPU)])
    assert census.violation() is None and census.record["own_kernel_ran"] is None and not census.record["judged"]


def test_no_own_kernel_with_unreadable_kernel_names_decides_nothing():
    census = _census(source="import cupy\nk = cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = x', 'copy')\n")
    census._judge_profile([_event("copy", 3.0), _event("sm90_xmma_gemm_f32f32", 30.0)])
    assert census.violation() is None and census.record["own_kernel_ran"] is None and census.record["why"]


def test_a_profiler_that_fails_to_start_is_recorded_not_blamed(monkeypatch):
    def refuse(self):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(torch.profiler.profile, "start", refuse)
    census = _census()
    census.plan("small", 5)
    for trial in range(5):
        with census.watch("small", trial):
            pass
    assert census.record["instrument"] == "not available" and "CUPTI" in census.record["why"]
    assert census.violation() is None and census.record["call"]["shape"] == "small"
    assert 1 <= census.record["call"]["trial"] <= 4


def test_allow_torch_records_without_judging():
    census = KernelCensus(SOURCE, "candidate.py", torch.device("cuda"), "allow_torch", "directory")
    census._judge_profile([_event("sm90_xmma_gemm_f32f32", 30.0)])
    assert census.violation() is None and census.record["own_kernel_ran"] is False and not census.record["judged"]


def test_cpu_without_the_interpreter_says_why(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    census = KernelCensus(SOURCE, "candidate.py", torch.device("cpu"), "own_kernels", "directory")
    census.plan("small", 5)
    with census.watch("small", 1):
        pass
    assert census.record["instrument"] == "not available" and "TRITON_INTERPRET" in census.record["why"]
    assert census.record["call"] is None and census.violation() is None


THREADS = textwrap.dedent(
    """
    import threading
    import time

    started = threading.Event()
    done = threading.Event()


    def work():
        started.set()
        done.wait(2.0)


    def starts_a_thread():
        thread = threading.Thread(target=work, name="background")
        thread.start()
        return thread


    def hands_work_to(pool):
        future = pool.submit(work)
        started.wait(2.0)  # returns once the work is under way, as a cheat would
        return future
    """
)


@pytest.fixture()
def fake_candidate(tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text(THREADS)
    module = import_file(path, "kbench_census_candidate")
    yield path, module
    module.done.set()


def test_a_thread_left_running_by_the_candidate_is_flagged(fake_candidate):
    path, module = fake_candidate
    census = ThreadCensus(path)
    with census.watch():
        thread = module.starts_a_thread()
    reason, evidence = census.violation()
    assert reason == "thread_left_running"
    assert (
        "'background'" in evidence
        and "starts_a_thread (candidate.py:" in evidence
        and "work (candidate.py:" in evidence
    )
    module.done.set()
    thread.join(2.0)
    with census.watch():
        pass
    assert census.violation() is None and census.record["calls"] == 2


def test_work_handed_to_an_older_thread_is_flagged(fake_candidate):
    from concurrent.futures import ThreadPoolExecutor

    path, module = fake_candidate
    with ThreadPoolExecutor(1) as pool:
        pool.submit(int).result()  # the pool's thread exists before the call
        census = ThreadCensus(path)
        with census.watch():
            future = module.hands_work_to(pool)
        reason, evidence = census.violation()
        module.done.set()
        future.result(2.0)
    assert reason == "thread_left_running" and "runs the candidate's code after the call returned" in evidence


def test_a_thread_finished_before_returning_is_fine(fake_candidate):
    path, module = fake_candidate
    census = ThreadCensus(path)
    module.done.set()
    with census.watch():
        module.starts_a_thread().join(2.0)
    assert census.violation() is None and census.record["left_running"] == []


@pytest.mark.slow
def test_torch_compile_pool_is_torchs_not_the_candidates(tmp_path):
    # Two compile threads: Inductor starts its compile pool inside the first (checked) call.
    proc = kbench(
        "run",
        "suite=full",
        "suite.tasks=[leaky_relu_fp32]",
        "method=torch_compile",
        "tracking=off",
        "executor.compile_threads=2",
        "eval.timing.enabled=false",
        "run.name=compiled",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    (record,) = result_records(run_dir).values()
    assert record["verdict"]["status"] == "correct", record["verdict"]
    threads = record["integrity"]["thread_census"]
    assert threads["left_running"] == [] and threads["calls"] == 5
    assert any("torch/_inductor" in text for text in threads["library_threads"]), threads


def test_a_thread_a_helper_library_starts_under_torch_is_torchs():
    """Regression (H100, torch_compile on gelu_tanh): Inductor's autotuning started tqdm's monitor
    thread, and the first frame outside the standard library (tqdm) was taken as the starter, so an
    honest compiled model was flagged ``thread_left_running``. The innermost frame in torch, triton
    or the candidate decides; a library called from the candidate itself is still the candidate's."""
    import os

    from runner.worker.integrity import _library_dirs, _starter

    torch_dir = _library_dirs()[0]
    candidate = "/job/candidate.py"
    tqdm = ("/venv/site-packages/tqdm/_monitor.py", 30, "__init__")
    under_torch = [
        tqdm,
        (os.path.join(torch_dir, "_inductor", "runtime", "autotune.py"), 10, "bench"),
        (candidate, 5, "forward"),
    ]
    assert _starter(under_torch, candidate)[0].startswith(torch_dir)
    from_candidate = [
        tqdm,
        (candidate, 7, "forward"),
        (os.path.join(torch_dir, "nn", "modules", "module.py"), 1, "_call_impl"),
    ]
    assert _starter(from_candidate, candidate)[0] == candidate
    assert _starter([tqdm], candidate) == tqdm


def test_the_static_screens_model_gives_the_same_defined_kernels():
    """The worker hands the census the screen's model of the file instead of parsing it again."""
    from runner.static_check import screen_candidate

    report = screen_candidate(SOURCE, "own_kernels")
    assert report.model is not None
    assert defined_kernels(SOURCE, report.model) == defined_kernels(SOURCE)
