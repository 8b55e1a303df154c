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
from runner.worker.kernel_census import _MAX_NAME_CHARS, KernelCensus, defined_kernels, moves_data
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
    """Test double at the GPU boundary: one ``torch.profiler`` event as the CUDA profiler reports it
    (this machine has no CUDA profiler), with the fields the census reads."""
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
    assert record["library_kinds"]["compute_ran"] is True  # recorded; no own kernel is the verdict
    reason, evidence = census.violation()
    assert reason == "no_own_kernel_ran" and "sm90_xmma_gemm_f32f32" in evidence and "_add_kernel" in evidence
    assert census.violation() is None  # reported once


def test_profile_with_an_own_kernel_records_its_share():
    census = _census()
    census._judge_profile([_event("_add_kernel", 30.0), _event(FILL, 10.0)])
    assert census.record["own"] == {"_add_kernel": 1} and census.record["own_gpu_share"] == 0.75
    assert census.violation() is None and census.record["own_kernel_ran"] is True


# Kernel names as PyTorch 2.x, cuBLAS and cutlass report them on an H100.
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)
_COPY_LAMBDA = (
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const"
    "::{lambda()#7}::operator()() const::{lambda(float)#1}"
)
COPY = (
    f"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<{_COPY_LAMBDA}>"
    f"(at::TensorIteratorBase&, {_COPY_LAMBDA} const&)::{{lambda(int)#1}}>(int, at::native::gpu_kernel_impl_nocast"
    f"<{_COPY_LAMBDA}>(at::TensorIteratorBase&, {_COPY_LAMBDA} const&)::{{lambda(int)#1}})"
)
GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


@pytest.mark.parametrize(
    ("name", "moves"),
    [
        (FILL, True),  # torch.zeros / full / fill_ / zero_
        (
            "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::FillFunctor"
            "<float> >(at::TensorIteratorBase&, at::native::FillFunctor<float> const&)::{lambda(int)#1}>(int, ...)",
            True,  # fill_ on a strided view
        ),
        (COPY, True),  # .contiguous() of a transposed view
        (
            f"void at::native::unrolled_elementwise_kernel<{_COPY_LAMBDA}, std::array<char*, 2ul>, 4, "
            "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
            "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, ...)",
            True,  # .to(torch.float16)
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::"
            "TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel"
            "_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)",
            True,  # .to(torch.bfloat16)
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::copy_device_to_device(at::TensorIterator&, "
            "bool, bool)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, "
            "at::detail::Array<char*, 2>, OffsetCalculator<1, unsigned int>, OffsetCalculator<1, unsigned int>, "
            "at::native::memory::LoadWithoutCast, at::native::memory::StoreWithoutCast>(int, ...)",
            True,  # a copy in PyTorch 1.x
        ),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*, "
            "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, "
            "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
            True,  # torch.cat
        ),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy_aligned16_contig<float, unsigned int, 3, "
            "128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, "
            "1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
            True,  # torch.stack
        ),
        ("void (anonymous namespace)::memset_kernel<float>(float*, float, unsigned long)", True),  # illustrative name
        (GEMM, False),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", False),
        (
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>(cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)",
            False,
        ),
        ("ampere_sgemm_128x64_nn", False),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, "
            "float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, "
            "float, float>, unsigned int, float, 4>)",
            False,
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
            False,  # the elementwise loop of a copy, but with arithmetic in it
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar"
            "(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}"
            "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
            "(int, ...)",
            False,  # relu
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda(at::TensorIteratorBase&)"
            "::{lambda()#2}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, "
            "std::array<char*, 2ul> >(int, ...)",
            False,  # what copy_ runs for a tensor with its negative bit set: it negates
        ),
        (
            "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
            "(float*, float const*, int, int, int, bool const*, int, bool)",
            False,
        ),
        ("triton_poi_fused_relu_0", False),  # a Triton kernel not of the candidate's file: unknown, so compute
    ],
)
def test_library_kernels_are_data_movement_or_compute(name, moves):
    assert moves_data(name) is moves


def _as_recorded(*names: str) -> dict[str, int]:
    """Kernels launched once each, under the names the record keeps (long C++ names are cut)."""
    return {name[:_MAX_NAME_CHARS]: 1 for name in names}


def test_an_own_kernel_beside_library_compute_is_a_violation_under_own_kernels():
    census = _census()
    census._judge_profile([_event("_add_kernel", 1.0), _event(FILL, 1.0), _event(GEMM, 30.0)])
    kinds = census.record["library_kinds"]
    assert census.record["own_kernel_ran"] is True and kinds["judged"] and kinds["compute_ran"] is True
    assert kinds["compute"] == _as_recorded(GEMM) and kinds["data_movement"] == _as_recorded(FILL)
    reason, evidence = census.violation()
    assert reason == "library_compute_ran" and GEMM in evidence and "_add_kernel" in evidence
    assert census.violation() is None


def test_an_own_kernel_beside_fills_and_copies_is_correct():
    census = _census()
    census._judge_profile(
        [
            _event(FILL, 1.0),
            _event("Memset (Device)", 1.0, "gpu_memset"),
            _event("_add_kernel", 30.0),
            _event(COPY, 2.0),
            _event("Memcpy DtoD (Device -> Device)", 1.0, "gpu_memcpy"),
        ]
    )
    kinds = census.record["library_kinds"]
    assert census.violation() is None and census.record["copies"] == 2
    assert kinds["judged"] and kinds["compute_ran"] is False and kinds["compute"] == {}
    assert kinds["data_movement"] == _as_recorded(FILL, COPY)


def test_no_own_kernel_wins_over_library_compute():
    census = _census()
    census._judge_profile([_event(FILL, 1.0), _event(GEMM, 30.0)])
    assert census.record["library_kinds"]["compute_ran"] is True
    assert census.violation()[0] == "no_own_kernel_ran" and census.violation() is None


def test_torch_compiles_library_kernels_are_not_judged():
    census = _census("torch_compile", "")
    census._judge_profile([_event("triton_poi_fused_relu_0", 5.0), _event(GEMM, 30.0)])
    kinds = census.record["library_kinds"]
    assert census.violation() is None and census.record["own_kernel_ran"] is True
    assert (
        kinds["compute"] == _as_recorded(GEMM) and kinds["compute_ran"] is True and not kinds["judged"] and kinds["why"]
    )


def test_library_compute_is_recorded_not_judged_under_allow_torch():
    census = KernelCensus(SOURCE, "candidate.py", torch.device("cuda"), "allow_torch", "directory")
    census._judge_profile([_event("_add_kernel", 1.0), _event(GEMM, 30.0)])
    kinds = census.record["library_kinds"]
    assert census.violation() is None and kinds["compute_ran"] is True and not kinds["judged"]


def test_library_compute_with_unreadable_kernel_names_decides_nothing():
    # The cupy kernel is the candidate's, but only its call, not its source, names it.
    source = SOURCE + "\nimport cupy\nk = cupy.ElementwiseKernel('float32 x', 'float32 y', 'y = x * 2', 'twice')\n"
    census = _census(source=source)
    census._judge_profile([_event("_add_kernel", 1.0), _event("twice", 3.0)])
    kinds = census.record["library_kinds"]
    assert census.violation() is None and kinds["compute"] == {"twice": 1}
    assert kinds["compute_ran"] is None and not kinds["judged"] and "spell out" in kinds["why"]


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
    assert census.record["library_kinds"]["compute_ran"] is None and not census.record["library_kinds"]["judged"]


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
