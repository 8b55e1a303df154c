"""The precision layer's bound (``runner/worker/precision.py``), on real tasks of the suite, on the CPU.

Honest fp32 kernels (other summation orders, blocked and online algorithms, approximate
transcendentals and division) must pass; TF32-rounded inputs and fp16 or bf16 arithmetic must
fail with the reason code their error's size names; a reference without error of its own falls
back to the floor. The worker's own path is used: ``float64_references`` then ``judge``.
"""

from __future__ import annotations

import types
import warnings

import pytest
import torch

from runner.tasks.model import read_native_task
from runner.worker.loading import as_output_list, build_model, import_file, make_inputs
from runner.worker.precision import (
    BF16_LIKE_ERROR,
    DEFAULTS_RATIO,
    FLOOR,
    RATIO_LIMIT,
    allowed_error,
    float64_references,
    judge_error,
    relative_error,
)
from tests.conftest import REPO

CPU = torch.device("cpu")
SEED, TRIAL_SEED = 42, 1042
LOG2E = 1.4426950408889634


def _task(name: str):
    (path,) = (REPO / "tasks").glob(f"*/{name}.py")
    return import_file(path, f"precision_{name}"), read_native_task(path).shapes["small"]


def _judge(name: str, candidate, references: list | None = None) -> tuple[str, dict, list]:
    """The reason code (or "") for ``candidate(model, inputs)`` on the task's small shape, the record, the checks;
    the fp32 reference's outputs are appended to ``references``, if given."""
    module, dims = _task(name)
    model = build_model(module.Model, module, dims, CPU, SEED)
    with torch.no_grad():
        expected = as_output_list(model(*make_inputs(module, dims, CPU, TRIAL_SEED)))
        if references is not None:
            references.append(expected)
        check = float64_references(module, {"small": dims}, CPU, SEED, TRIAL_SEED, {("small", 0): expected})
        outputs = as_output_list(candidate(model, make_inputs(module, dims, CPU, TRIAL_SEED)))
    checks: list = []
    violation = check.judge("small", outputs, checks)
    return (violation[0] if violation else ""), check.record, checks


def _judge_steady(name: str, candidate, code: str) -> tuple[str, dict, list]:
    """``_judge``, once more where the reason is not ``code`` and the fp32 reference's own error came out
    otherwise the second time: the same computation in one process giving two answers is the machine's
    arithmetic, not the check (twice in CI, on exp_scores_fp32: an error of 3.84e-5 for a plain
    ``torch.exp`` that gives 2.35e-8 in every other run, the candidate's error identical to the digit).
    A reference whose error is the same both times stands: a wrong verdict then fails the test."""
    references: list = []
    reason, record, checks = _judge(name, candidate, references)
    if reason == code:
        return reason, record, checks
    again = _judge(name, candidate, references)
    first, second = (r["shapes"]["small"].get("reference_error") for r in (record, again[1]))
    if first != second:
        (a, *_), (b, *_) = references
        differ = (a != b).nonzero()
        warnings.warn(
            f"{name}: the fp32 reference's own error was {first}, then {second} in the same process; "
            f"{len(differ)} of {a.numel()} elements differ, by up to {(a - b).abs().max().item():.3g}, "
            f"the first at {differ[:4].tolist()}",
            stacklevel=2,
        )
        return again
    return reason, record, checks


# -- downcasts -----------------------------------------------------------------------------------


def _round(x, drop_bits: int, nearest: bool):
    """fp32 with the low ``drop_bits`` mantissa bits cleared (truncated, or rounded to nearest)."""
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        return x
    bits = x.contiguous().view(torch.int32)
    if nearest:
        bits = bits + (1 << (drop_bits - 1))
    return (bits & ~((1 << drop_bits) - 1)).view(torch.float32)


def _rounded_inputs(drop_bits: int, nearest: bool):
    """Parameters and inputs rounded to fewer mantissa bits, arithmetic in fp32: a TF32 tensor core."""

    def run(model, inputs):
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.copy_(_round(tensor, drop_bits, nearest))
        return model(*[_round(x, drop_bits, nearest) for x in inputs])

    return run


def _computed_in(dtype):
    def run(model, inputs):
        outputs = model.to(dtype)(*[x.to(dtype) if x.dtype == torch.float32 else x for x in inputs])
        return [y.float() for y in as_output_list(outputs)]

    return run


TF32_TRUNCATED = _rounded_inputs(13, nearest=False)  # what Triton's default tl.dot reads of fp32 operands
TF32_ROUNDED = _rounded_inputs(13, nearest=True)  # cuBLAS's conversion
DOWNCASTS = {
    "tf32_truncated": (TF32_TRUNCATED, "reduced_precision_tf32"),
    "tf32_rounded": (TF32_ROUNDED, "reduced_precision_tf32"),
    "fp16": (_computed_in(torch.float16), "reduced_precision_tf32"),  # 11 significant bits, as TF32
    "bf16": (_computed_in(torch.bfloat16), "reduced_precision_bf16"),
}
TASKS = [
    "matmul_square_fp32",
    "matmul_long_k8192_o_proj_fp32",
    "layer_norm_falcon40b_fp32",
    "softmax_attn_scores_fp32",
    "sum_rows_fp32",
    "exp_scores_fp32",
    "gelu_tanh",
]
# Inputs rounded to nearest before a plain sum: the errors average out (105 u), below the bound,
# and nothing is gained by it. Truncation (biased) and fp16/bf16 sums are caught.
NOT_CAUGHT = {("sum_rows_fp32", "tf32_rounded")}


@pytest.mark.parametrize("downcast", DOWNCASTS)
@pytest.mark.parametrize("task", TASKS)
def test_downcasts_fail_with_the_code_of_their_precision(task, downcast):
    if (task, downcast) in NOT_CAUGHT:
        pytest.skip("rounding errors average out in a plain sum (documented in precision.py)")
    run, code = DOWNCASTS[downcast]
    reason, record, checks = _judge_steady(task, run, code)
    assert reason == code, record
    assert checks == ["precision"] and record["status"] == "checked" and not record["shapes"]["small"]["ok"]


# -- honest fp32 kernels -------------------------------------------------------------------------


def _approx(y: torch.Tensor, ulps: float = 2.0) -> torch.Tensor:
    """``y`` off by up to ``ulps`` units in the last place: ex2.approx, rsqrt.approx, div.full."""
    generator = torch.Generator().manual_seed(5)
    noise = (torch.rand(y.shape, generator=generator, dtype=torch.float64) * 2 - 1) * ulps * 2.0**-23
    return (y.double() * (1 + noise)).float()


def _matmul_blocked(a, b, block=32, reverse=False):
    starts = list(range(0, a.shape[1], block))
    acc = torch.zeros(a.shape[0], b.shape[1])
    for start in reversed(starts) if reverse else starts:
        acc = acc + a[:, start : start + block] @ b[start : start + block]
    return acc


def _sum_in_lanes(x, lanes):
    """Each of ``lanes`` accumulators adds every lanes-th element in turn, then a tree: a Triton row sum."""
    acc = torch.zeros(*x.shape[:-1], lanes)
    for start in range(0, x.shape[-1], lanes):
        acc = acc + x[..., start : start + lanes]
    return acc.sum(-1)


def _layer_norm(model, x, one_pass=False):
    n = x.shape[-1]
    mean = _sum_in_lanes(x, 64).unsqueeze(-1) / n
    if one_pass:
        var = _sum_in_lanes(x * x, 64).unsqueeze(-1) / n - mean * mean
    else:
        var = _sum_in_lanes((x - mean) ** 2, 64).unsqueeze(-1) / n
    rstd = _approx(torch.rsqrt(var + model.norm.eps))
    return (x - mean) * rstd * model.norm.weight + model.norm.bias


def _softmax_exp2(scores):
    e = _approx(torch.exp2((scores - scores.amax(-1, keepdim=True)) * LOG2E))
    return e * _approx(1.0 / _sum_in_lanes(e, 16).unsqueeze(-1))


def _softmax_online(scores, block=16):
    running_max = torch.full(scores.shape[:-1] + (1,), -float("inf"))
    total = torch.zeros_like(running_max)
    for start in range(0, scores.shape[-1], block):
        chunk = scores[..., start : start + block]
        new_max = torch.maximum(running_max, chunk.amax(-1, keepdim=True))
        total = total * torch.exp(running_max - new_max) + torch.exp(chunk - new_max).sum(-1, keepdim=True)
        running_max = new_max
    return _approx(torch.exp(scores - running_max)) / total


def _gelu_tanh_through_exp2(x):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh = 2.0 / (1.0 + _approx(torch.exp2(-2.0 * inner * LOG2E))) - 1.0
    return 0.5 * x * (1.0 + tanh)


HONEST = {
    "matmul_square_fp32": {
        "k_blocks_of_32": lambda m, x: _matmul_blocked(*x),
        "k_blocks_reversed": lambda m, x: _matmul_blocked(*x, block=64, reverse=True),
        "one_k_at_a_time": lambda m, x: _matmul_blocked(*x, block=1),
    },
    "matmul_long_k8192_o_proj_fp32": {
        "k_blocks_of_32": lambda m, x: _matmul_blocked(x[0], m.o_proj.weight.t()),
        "one_k_at_a_time": lambda m, x: _matmul_blocked(x[0], m.o_proj.weight.t(), block=1),
    },
    "layer_norm_falcon40b_fp32": {
        "two_pass_approx_rsqrt": lambda m, x: _layer_norm(m, x[0]),
        "one_pass_variance": lambda m, x: _layer_norm(m, x[0], one_pass=True),
    },
    "softmax_attn_scores_fp32": {
        "exp2_approx_reciprocal": lambda m, x: _softmax_exp2(x[0]),
        "online_blocks_of_16": lambda m, x: _softmax_online(x[0]),
    },
    "sum_rows_fp32": {
        "lanes_128": lambda m, x: _sum_in_lanes(x[0], 128),
        "one_accumulator": lambda m, x: _sum_in_lanes(x[0], 1),
    },
    "exp_scores_fp32": {"ex2_approx": lambda m, x: _approx(torch.exp2(x[0] * LOG2E))},
    "gelu_tanh": {
        "tanh_through_exp2": lambda m, x: _gelu_tanh_through_exp2(x[0]),
        "x_sigmoid_2z": lambda m, x: x[0] * torch.sigmoid(1.5957691216057308 * (x[0] + 0.044715 * x[0] ** 3)),
    },
}


@pytest.mark.parametrize("task,variant", [(task, variant) for task, variants in HONEST.items() for variant in variants])
def test_honest_fp32_kernels_pass(task, variant):
    reason, record, checks = _judge(task, HONEST[task][variant])
    entry = record["shapes"]["small"]
    assert reason == "" and entry["ok"], record
    # With room to spare: the bound is not what keeps them in.
    assert entry["ratio"] < RATIO_LIMIT / 8, record
    assert checks == ["precision"]


def test_the_reference_itself_passes_at_ratio_one_or_less():
    reason, record, _ = _judge("matmul_square_fp32", lambda m, x: m(*x))
    assert reason == "" and record["shapes"]["small"]["ratio"] <= 1.0


# -- the floor, the bound, the metric ------------------------------------------------------------


def test_an_exact_reference_uses_the_floor():
    # Pixel shuffle moves values: the fp32 reference is exact, so only the floor gives any room.
    reason, record, _ = _judge("pixel_shuffle_x2_edsr_fp32", lambda m, x: m(*x) * (1 + 2.0**-16))
    assert record["shapes"]["small"]["reference_error"] == [0.0]
    assert reason == ""
    reason, record, _ = _judge("pixel_shuffle_x2_edsr_fp32", lambda m, x: m(*x) * (1 + 2.0**-12))
    assert reason == "reduced_precision_tf32"


def test_bound_arithmetic():
    assert allowed_error(0.0) == RATIO_LIMIT * FLOOR == 2.0**-15
    assert judge_error(0.0, 0.0) is None
    assert judge_error(0.99 * allowed_error(0.0), 0.0) is None
    assert judge_error(1.01 * allowed_error(0.0), 0.0) == "reduced_precision_tf32"
    assert judge_error(BF16_LIKE_ERROR, 0.0) == "reduced_precision_bf16"
    # An ill-conditioned task, whose fp32 reference is itself far from float64, leaves more room.
    assert judge_error(1e-3, 1e-4) is None
    assert judge_error(1e-2, 1e-4) == "reduced_precision_bf16"


def test_bound_where_the_reference_runs_reduced_at_pytorch_defaults():
    """cuDNN's default TF32 convolution: the reference's own error is TF32's (5000 u), with TF32 off 3 u.
    The bound is then 4x the default's error, not 64x: TF32 done another way passes, bf16 fails."""
    u = 2.0**-24
    default, strict = 5000 * u, 3 * u
    assert allowed_error(default, strict) == DEFAULTS_RATIO * default < allowed_error(default) / 8
    assert judge_error(13253 * u, default, strict) is None  # truncating TF32 (the table in precision.py)
    assert judge_error(25118 * u, default, strict) == "reduced_precision_bf16"  # the least bf16 error measured
    # Where nothing runs reduced both errors agree, and the bound is the plain one.
    assert allowed_error(strict, strict) == allowed_error(strict) == RATIO_LIMIT * FLOOR
    assert allowed_error(1e-4, 1e-4) == allowed_error(1e-4)


def test_relative_error():
    reference = torch.tensor([3.0, 4.0, float("inf"), float("nan")], dtype=torch.float64)
    value = torch.tensor([3.0, 4.0 + 5e-3, float("inf"), float("nan")], dtype=torch.float64)
    assert relative_error(value, reference) == pytest.approx(1e-3)
    assert relative_error(torch.zeros(3), torch.zeros(3, dtype=torch.float64)) is None


# -- where the layer does not apply or is not available ------------------------------------------


def _synthetic(forward, inputs=lambda: [torch.randn(8, 8)]):
    module = types.ModuleType("precision_synthetic")

    class Model(torch.nn.Module):
        def forward(self, x):
            return forward(x)

    module.Model, module.get_inputs, module.get_init_inputs = Model, inputs, lambda: []
    return module


def _prepare(module):
    model = build_model(module.Model, module, {}, CPU, SEED)
    with torch.no_grad():
        expected = as_output_list(model(*make_inputs(module, {}, CPU, TRIAL_SEED)))
        return float64_references(module, {"small": {}}, CPU, SEED, TRIAL_SEED, {("small", 0): expected})


def test_not_applicable_to_reduced_precision_or_integer_outputs():
    half = _prepare(_synthetic(lambda x: x * 2, inputs=lambda: [torch.randn(8, 8, dtype=torch.float16)]))
    assert half.record["status"] == "not_applicable" and "float16" in half.record["why"]
    integers = _prepare(_synthetic(lambda x: x.argmax(-1)))
    assert integers.record["status"] == "not_applicable"
    assert integers.judge("small", [torch.zeros(8, dtype=torch.long)], checks := []) is None and checks == []


def test_a_failing_float64_reference_is_recorded_and_never_fails_the_candidate():
    def float32_only(x):
        if x.dtype != torch.float32:
            raise NotImplementedError("no float64 kernel")  # stands in for an op without float64 support
        return x * 2

    check = _prepare(_synthetic(float32_only))
    assert check.record["status"] == "not_available"
    assert "NotImplementedError: no float64 kernel" in check.record["shapes"]["small"]["not_available"]
    assert check.judge("small", [torch.zeros(8, 8)], checks := []) is None and checks == []


def test_a_reference_that_casts_to_float32_is_not_available():
    check = _prepare(_synthetic(lambda x: x.float() * 2))
    assert check.record["status"] == "not_available"
    assert "casts to a fixed dtype" in check.record["shapes"]["small"]["not_available"]


# -- the last timed call ---------------------------------------------------------------------------


def _timed(module, inputs: list, candidate) -> tuple[str, dict]:
    """``add_timed`` then ``judge`` for the timed call on ``inputs``, as the worker does after timing."""
    check = _prepare(module)
    model = build_model(module.Model, module, {}, CPU, SEED)
    with torch.no_grad():
        expected = as_output_list(model(*inputs))
        check.add_timed("timed", module, {}, CPU, SEED, inputs, expected)
        violation = check.judge("timed", as_output_list(candidate(model, inputs)), [])
    return (violation[0] if violation else ""), check.record


def test_the_last_timed_call_is_judged_on_its_own_inputs():
    """Precise on the checked trial, TF32 on the timed inputs: the timed call's float64 answer shows it."""
    module = _synthetic(lambda x: x @ x.t())
    timed_inputs = [torch.randn(8, 8)]
    reason, record = _timed(module, timed_inputs, lambda model, inputs: model(*inputs))
    assert reason == "" and record["shapes"]["timed"]["ok"] is True
    reason, record = _timed(module, timed_inputs, TF32_TRUNCATED)
    assert reason == "reduced_precision_tf32" and record["shapes"]["timed"]["ratio"] > RATIO_LIMIT
    assert record["shapes"]["small"]["reference_error"]  # the checked shape's entry is kept beside it


def test_the_timed_call_beyond_its_float64_budget_is_recorded_not_judged(monkeypatch):
    import runner.worker.precision as precision

    monkeypatch.setattr(precision, "MAX_TIMED_FLOAT64_ELEMENTS", 100)  # 8x8 input + 8x8 output = 128 elements
    reason, record = _timed(_synthetic(lambda x: x * 3), [torch.randn(8, 8)], _computed_in(torch.bfloat16))
    assert reason == ""
    assert "more than the float64 budget of 100" in record["shapes"]["timed"]["not_available"]


def test_the_timed_call_of_a_reduced_precision_task_adds_nothing():
    module = _synthetic(lambda x: x * 2, inputs=lambda: [torch.randn(8, 8, dtype=torch.float16)])
    reason, record = _timed(module, [torch.randn(8, 8, dtype=torch.float16)], lambda model, inputs: model(*inputs))
    assert reason == "" and record == {"status": "not_applicable", "why": record["why"]}


def test_the_strict_reference_restores_every_numerics_flag():
    """The TF32-off run of the reference sets cuDNN's and cuBLAS's flags and puts them back as they were,
    whatever they were. Test double at the GPU boundary: a device object that says "cuda" (no GPU here;
    the flags themselves are real and settable on a CPU build)."""
    import types as pytypes

    from runner.worker.precision import _strict_fp32_outputs

    gpu_double = pytypes.SimpleNamespace(type="cuda")
    model = torch.nn.Linear(4, 4)
    saved = (torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    try:
        for cudnn_tf32, precision in [(True, "highest"), (False, "high"), (True, "medium")]:
            torch.backends.cudnn.allow_tf32 = cudnn_tf32
            torch.set_float32_matmul_precision(precision)
            state = (cudnn_tf32, torch.backends.cuda.matmul.allow_tf32, precision)
            (output,) = _strict_fp32_outputs(model, [torch.randn(2, 4)], gpu_double)
            assert output.shape == (2, 4)
            assert (
                torch.backends.cudnn.allow_tf32,
                torch.backends.cuda.matmul.allow_tf32,
                torch.get_float32_matmul_precision(),
            ) == state
        assert _strict_fp32_outputs(model, [torch.randn(2, 4)], CPU) is None  # nothing runs reduced on a CPU
    finally:
        torch.backends.cudnn.allow_tf32, precision = saved
        torch.set_float32_matmul_precision(precision)


def test_relative_error_skips_non_finite_elements_and_leaves_its_inputs_alone():
    """Elements not finite in both are left out of both norms; float64 inputs (the answers are
    float64, and ``.double()`` of those is the same tensor) come back unchanged."""
    from runner.worker.precision import relative_error

    answer = torch.tensor([3.0, float("inf"), 4.0, 1.0], dtype=torch.float64)
    value = torch.tensor([3.0, 2.0, 4.0, float("nan")], dtype=torch.float64)
    before = (answer.clone(), value.clone())
    assert relative_error(value, answer) == 0.0
    assert torch.equal(answer, before[0]) and torch.equal(value.isnan(), before[1].isnan())
    assert relative_error(torch.tensor([0.0, 0.0, 5.0, 1.0]), answer) == pytest.approx((10 / 26) ** 0.5)
    assert relative_error(torch.zeros(2), torch.zeros(2, dtype=torch.float64)) is None


def test_relative_error_reads_back_once_however_many_chunks(monkeypatch):
    """One read of its two sums back to the host, for one chunk or many (see test_compare.py)."""
    from runner.worker import precision
    from tests.conftest import count_host_reads

    answer = torch.randn(100, dtype=torch.float64)
    for chunk in (1 << 24, 7):
        monkeypatch.setattr(precision, "_CHUNK", chunk)
        with count_host_reads() as reads:
            assert precision.relative_error(answer.float(), answer) < 1e-6
        assert reads.count == 1
