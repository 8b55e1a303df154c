"""The precision layer: an fp32 task's answer must carry fp32's precision, not only meet its tolerance.

Owns the float64 references and the bound. In the reference stage, before the candidate is
imported, trial 0 of every checked shape is computed once more in float64: a fresh reference
model built from the same seed and converted with ``.double()``, float32 inputs cast to float64,
other inputs as they are. The fp32 reference's own error against that answer is kept with it.
Once the candidate meets the ordinary tolerance on trial 0 of a shape, its error against the
float64 answer may be at most ``RATIO_LIMIT`` times the fp32 reference's own error (floored at
``FLOOR``). Beyond that the evaluation ends as ``integrity_violation`` with a reason code named
after the precision the error looks like:
- ``reduced_precision_tf32``: an error of a 10-bit mantissa, as TF32 tensor cores (Triton's
  default ``tl.dot`` on fp32 inputs, cuBLAS with TF32 allowed) or fp16 arithmetic leave;
- ``reduced_precision_bf16``: an error of 2^-10 or more, as bf16 (7-bit mantissa) arithmetic leaves.
Both mean "less precise than fp32"; the name is read off the size of the error alone (see
``reduced_precision_reason``), and the evidence gives the numbers behind it.

The last timed call is judged the same way after timing (``add_timed``): the float64 answer for
its input set, on the timed shape, against the fp32 reference's output on the same inputs. So a
candidate that keeps fp32 precision only for the checked calls, or only at the small checked
shapes, still meets the bound where it is measured. That answer is computed after the
candidate's import, as the timed output's fp32 reference is.

Where PyTorch's defaults let the fp32 reference itself run reduced: cuDNN runs fp32 convolutions
in TF32 unless told otherwise (``torch.backends.cudnn.allow_tf32`` is on by default), so the
reference's own error there is TF32's and a bound 64x that would admit bf16. On a GPU the
reference is therefore also run once with TF32 off everywhere (``strict``), and the bound is the
larger of 64x the strict reference's error (floored) and ``DEFAULTS_RATIO`` (4) x the reference's
error at the defaults: a candidate may be as imprecise as the reference it is compared with, not
more (TF32 convolutions pass where the reference's do; bf16 fails). Where nothing runs reduced
the two errors are the same and the bound is 64x, as above.

The layer applies where every floating-point output of the reference is float32. Where the
float64 computation fails (an op without float64 support), returns another dtype (the reference
casts internally) or would be too big, the record says why and that shape is not judged: never a
failure of the candidate. Every result carries the record in ``integrity["precision"]``.
Must not touch: the fp32 expected outputs, the default dtype; global numerics flags only around the
strict reference's call, restored after it.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from runner.worker import fused_checks
from runner.worker.integrity import numerics_flags, restore_numerics_flags
from runner.worker.loading import as_output_list, build_model, make_inputs

# Why 64 x max(reference error, 2^-21). Relative L2 errors against float64, measured on the CPU at
# the tasks' small shapes (tests/test_precision.py runs the same variants), in units of
# u = 2^-24, fp32's unit roundoff:
#                          fp32 ref  honest fp32 kernels, worst of           TF32 RNE / truncated   fp16   bf16
# matmul_square_fp32 (K=64)   2.5 u   K in blocks, reversed, by one: 2.5 u    5035 / 13253 u    6149 u  47642 u
# matmul_long_k8192 (K=1024)  4.2 u   K in blocks, by one: 9.7 u              4627 / 12237 u    5759 u  46692 u
# layer_norm_falcon40b        1.0 u   two-/one-pass, approx rsqrt: 2.3 u      4746 /  7918 u    5900 u  47117 u
# softmax_attn_scores         1.0 u   exp2, approx exp and 1/x, online: 3.3 u 6410 /  9669 u    7582 u  59736 u
# sum_rows_fp32 (1024)        0.6 u   128 lanes, one accumulator: 5.8 u        105 /  5944 u    2998 u  25118 u
# exp_scores_fp32             0.4 u   ex2.approx (tl.exp): 2.4 u              2475 /  4966 u    4138 u  32545 u
# gelu_tanh                   0.6 u   tanh through exp2, x*sigmoid: 0.9 u     4063 /  8145 u    5420 u  44095 u
# The honest Triton controls (tests/adversarial/controls) stay under 6 u. The bound is 512 u (2^-15)
# while the reference's own error is under the floor (8 u), 64x that error above it: 50x above the
# honest kernels here, 3.7x above the worst honest error found at any shape (139 u: one fp32
# accumulator along a 131072-element row; tl.exp's exp2(x * log2 e) at x up to 80 is 32 u), and
# 4.8x under the least TF32 error (9x under TF32 matmuls, 24x under truncating ones), 5.9x under
# fp16, 49x under bf16. Above the floor the ratio rules: one-pass variance on rows whose mean is
# 30 standard deviations (an unstable algorithm on ill-conditioned data) is 43x its reference's
# 18 u, TF32 on them 4280x. Not caught: inputs rounded to nearest before a plain sum (105 u),
# where the rounding errors average out and nothing is gained either.
UNIT_ROUNDOFF_FP32 = 2.0**-24
FLOOR = 8 * UNIT_ROUNDOFF_FP32  # 2^-21: a few roundings' worth, where the fp32 reference is (nearly) exact
RATIO_LIMIT = 64.0
# Where the reference at PyTorch's defaults is itself reduced (cuDNN's TF32 convolutions), a candidate may be
# this many times as far from float64 as it is: TF32 computed another way (truncating instead of rounding
# is 2.6x in the table above) passes, bf16 (10x TF32's error and more) does not.
DEFAULTS_RATIO = 4.0
# TF32 and fp16 errors measured 2^-12.7 to 2^-10.3 (table above), bf16 2^-9.4 to 2^-8.1: the boundary lies between.
BF16_LIKE_ERROR = 2.0**-10
# A float64 copy of more elements than this (inputs, parameters and outputs together) is not made
# for a checked shape (such shapes are the timed ones, and the small check shapes carry the check),
# nor of more than the second for the timed call (2 GiB of float64; the GPU holds the timed inputs anyway).
MAX_FLOAT64_ELEMENTS = 1 << 24
MAX_TIMED_FLOAT64_ELEMENTS = 1 << 28

_CHUNK = 1 << 24


class Float64Unavailable(Exception):
    """The float64 reference cannot be had for a shape; the message says why."""


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float | None:
    """``||value - reference|| / ||reference||`` in float64 over the elements finite in both.

    None where the reference is zero there (no scale to measure against). The elementwise
    NaN and infinity patterns are the ordinary tolerance's business, checked before this.
    """
    if fused_checks.available(reference) and fused_checks.available(value) and value.device == reference.device:
        squared_error, squared_norm = fused_checks.squared_sums(value, reference)
    else:
        squared_error, squared_norm = _torch_squared_sums(value, reference)
    if squared_norm == 0.0:
        return None
    return math.sqrt(squared_error / squared_norm)


def _torch_squared_sums(value: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """``(sum((v - r)^2), sum(r^2))`` in float64 over the elements finite in both, with PyTorch's ops
    (CUDA tensors take ``fused_checks.squared_sums``, the same sums in another order)."""
    v, r = value.detach().reshape(-1), reference.detach().reshape(-1)
    sums = torch.zeros(2, dtype=torch.float64, device=r.device)  # squared error, squared norm: read once, at the end
    for start in range(0, r.numel(), _CHUNK):
        rc = r[start : start + _CHUNK].double()
        vc = v[start : start + _CHUNK].to(rc.device).double()
        drop = ~(torch.isfinite(rc) & torch.isfinite(vc))
        # Not in place: .double() of a float64 tensor is the caller's tensor itself.
        rc, vc = rc.masked_fill(drop, 0.0), vc.masked_fill(drop, 0.0)
        sums += torch.stack([(vc - rc).square().sum(), rc.square().sum()])
    squared_error, squared_norm = sums.tolist()
    return squared_error, squared_norm


def allowed_error(reference_error: float, strict_error: float | None = None) -> float:
    """The largest error against float64 that an fp32 candidate may have.

    ``reference_error``: the fp32 reference's at PyTorch's defaults; ``strict_error``: the same reference
    with TF32 off everywhere (None: not measured, as on a CPU, where nothing runs reduced)."""
    if strict_error is None:
        return RATIO_LIMIT * max(reference_error, FLOOR)
    return max(RATIO_LIMIT * max(strict_error, FLOOR), DEFAULTS_RATIO * reference_error)


def reduced_precision_reason(candidate_error: float) -> tuple[str, str]:
    """The reason code for a candidate error beyond the bound, and the precision it looks like.

    Read off the error's size alone: TF32 and fp16 round to 11 significant bits (unit roundoff
    2^-11), bf16 to 8 (2^-8); an op's own conditioning can shift an error by a bit or two.
    """
    if candidate_error >= BF16_LIKE_ERROR:
        return "reduced_precision_bf16", "like bf16 arithmetic (8 significant bits)"
    return "reduced_precision_tf32", "like TF32 or fp16 arithmetic (11 significant bits)"


def judge_error(candidate_error: float, reference_error: float, strict_error: float | None = None) -> str | None:
    """The reason code when the candidate is less precise than fp32 allows, else None."""
    if candidate_error <= allowed_error(reference_error, strict_error):
        return None
    return reduced_precision_reason(candidate_error)[0]


class PrecisionCheck:
    """The float64 answers of one evaluation's checked shapes (and its last timed call) and the record of the check."""

    def __init__(self, record: dict) -> None:
        self.record = record  # JSON; the worker puts it into result.integrity["precision"]
        # key -> per output: the float64 answer (None: not compared), the fp32 reference's error, and that
        # reference's error with TF32 off (None where not measured)
        self._prepared: dict[str, tuple[list, list, list]] = {}

    def prepare(
        self,
        key: str,
        module: ModuleType,
        dims: dict,
        device,
        seed: int,
        inputs: list,
        outputs32: list,
        budget: int = MAX_FLOAT64_ELEMENTS,
    ) -> None:
        """The float64 answer for ``inputs`` on ``dims`` (``outputs32``: the fp32 reference's), judged later as ``key``."""
        try:
            answers, strict32 = _float64_answer(module, dims, device, seed, inputs, outputs32, budget)
            errors = _reference_errors(outputs32, answers)
            strict = _reference_errors(strict32, answers) if strict32 is not None else [None] * len(errors)
        except Float64Unavailable as exc:
            self.record["shapes"][key] = {"not_available": str(exc)}
            return
        except Exception as exc:  # an op without float64 support is no failure of the candidate's
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            self.record["shapes"][key] = {"not_available": f"the float64 reference failed: {message}"}
            return
        self._prepared[key] = ([a if e is not None else None for a, e in zip(answers, errors)], errors, strict)
        self.record["shapes"][key] = {"reference_error": errors}
        if strict32 is not None:
            self.record["shapes"][key]["reference_error_strict"] = strict

    def add_timed(
        self, key: str, module: ModuleType, dims: dict, device, seed: int, inputs: list, outputs32: list
    ) -> None:
        """Prepare the last timed call (its input set, the fp32 reference's outputs on it) for ``judge(key, ...)``.

        Nothing where the layer does not apply (outputs not all float32)."""
        if self.record["status"] == "not_applicable" or not_applicable(outputs32):
            return
        self.prepare(key, module, dims, device, seed, inputs, outputs32, MAX_TIMED_FLOAT64_ELEMENTS)

    def prepared(self, key: str) -> bool:
        """Whether ``judge(key, ...)`` has a float64 answer to compare with."""
        return key in self._prepared

    def judge(self, shape_name: str, outputs: list, runtime_checks: list) -> tuple[str, str] | None:
        """Compare trial 0's outputs (already within tolerance) with the float64 answer.

        Returns ``(reason, evidence)`` for a violation, else None; records the errors and adds
        ``"precision"`` to ``runtime_checks`` when the comparison ran.
        """
        prepared = self._prepared.pop(shape_name, None)  # dropped once used: the memory is the candidate's
        if prepared is None:
            return None
        answers, reference_errors, strict_errors = prepared
        errors: list = []
        worst = None
        for index, (answer, reference_error, strict_error) in enumerate(zip(answers, reference_errors, strict_errors)):
            error = None if answer is None else relative_error(outputs[index], answer)
            errors.append(error)
            if error is None:
                continue
            allowed = allowed_error(reference_error, strict_error)
            # In units of the reference's own error (floored) where nothing runs reduced: RATIO_LIMIT is the bound.
            ratio = RATIO_LIMIT * error / allowed
            if worst is None or ratio > worst[0]:
                worst = (ratio, index, error, reference_error, strict_error, allowed)
        entry = self.record["shapes"][shape_name]
        entry["candidate_error"] = errors
        entry["ratio"] = None if worst is None else worst[0]
        entry["ok"] = worst is None or worst[0] <= RATIO_LIMIT
        self.record["status"] = "checked"
        if "precision" not in runtime_checks:
            runtime_checks.append("precision")
        if entry["ok"]:
            return None
        ratio, index, error, reference_error, strict_error, allowed = worst
        reason, looks_like = reduced_precision_reason(error)
        if allowed == allowed_error(reference_error):  # the plain bound: nothing ran reduced
            bound = (
                f"{error / max(reference_error, FLOOR):.0f}x the larger of the fp32 reference's own error "
                f"({reference_error:.3g}) and the floor ({FLOOR:.3g}), where {RATIO_LIMIT:.0f}x is allowed"
            )
        else:
            bound = (
                f"more than the {allowed:.3g} allowed: {RATIO_LIMIT:.0f}x the fp32 reference's own error with TF32 "
                f"off ({strict_error:.3g}, floored at {FLOOR:.3g}) or {DEFAULTS_RATIO:.0f}x its error at PyTorch's "
                f"defaults ({reference_error:.3g}), the larger"
            )
        evidence = (
            f"output {index} is {error:.3g} (2^{math.log2(error):.1f}) from a float64 reference in relative L2 norm, "
            f"{bound}: about {-math.log2(error):.0f} bits of precision where fp32 has 24, {looks_like}"
        )
        return reason, evidence


def float64_references(
    module: ModuleType, shapes: dict, device: torch.device, seed: int, trial_seed: int, expected: dict
) -> PrecisionCheck:
    """The float64 answers for trial 0 of every shape; ``expected[(shape, 0)]`` holds the fp32 outputs.

    Runs in the reference stage, before the candidate is imported.
    """
    for shape_name in shapes:
        why = not_applicable(expected[(shape_name, 0)])
        if why:
            return PrecisionCheck({"status": "not_applicable", "why": why})
    check = PrecisionCheck(
        {"status": "prepared", "bound": {"ratio": RATIO_LIMIT, "floor": FLOOR, "metric": "relative L2"}, "shapes": {}}
    )
    for shape_name, dims in shapes.items():
        inputs = make_inputs(module, dims, device, trial_seed)
        check.prepare(shape_name, module, dims, device, seed, inputs, expected[(shape_name, 0)])
    if not check._prepared:
        check.record["status"] = "not_available"
    return check


def not_applicable(outputs: list) -> str:
    """Why the float64 layer does not apply to a reference with these outputs ("": it applies)."""
    floating = [x.dtype for x in outputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not floating:
        return "the reference has no floating-point outputs"
    others = sorted({str(dtype) for dtype in floating if dtype != torch.float32})
    if others:
        return f"the reference's floating-point outputs are not all float32 ({', '.join(others)})"
    return ""


def _float64_answer(
    module: ModuleType, dims: dict, device: torch.device, seed: int, inputs: list, outputs32: list, budget: int
):
    model = build_model(module.Model, module, dims, device, seed)
    answers, strict32 = float64_calls(model, inputs, outputs32, device, budget)
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # a float64 kernel's failure is reported here, not in the candidate's stage
    return answers, strict32


def float64_calls(model, inputs: list, outputs32: list, device: torch.device, budget: int = MAX_FLOAT64_ELEMENTS):
    """The reference's calls behind its float64 answer, queued, nothing read back: the fp32 call with TF32 off
    (None on a CPU), then ``model`` converted to float64 in place and called on the float32 inputs cast.
    ``Float64Unavailable`` where the model is no ``nn.Module`` or its tensors exceed ``budget`` elements. Also what
    ``preload.py`` captures, so the kernels it loads ahead are the ones called here."""
    if not isinstance(model, torch.nn.Module):
        raise Float64Unavailable("the reference model is not an nn.Module, so it cannot be converted to float64")
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
    tensors += [x for x in outputs32 if isinstance(x, torch.Tensor)]
    size = sum(x.numel() for x in tensors if x.is_floating_point())
    if size > budget:
        raise Float64Unavailable(f"{size} floating-point elements, more than the float64 budget of {budget}")
    strict32 = _strict_fp32_outputs(model, inputs, device)
    model = model.double()
    inputs = [x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in inputs]
    return as_output_list(model(*inputs)), strict32


def _strict_fp32_outputs(model, inputs: list, device: torch.device) -> list | None:
    """The fp32 reference's outputs with TF32 off in cuDNN and cuBLAS (the flags restored after);
    None on a CPU, where no library runs fp32 reduced."""
    if device.type != "cuda":
        return None
    # The snapshot and restore the worker's numerics-flag check uses (integrity.py), not cudnn.flags(),
    # which would also reset other flags and whose signature moves between torch releases.
    flags = numerics_flags()
    try:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        return as_output_list(model(*inputs))
    finally:
        restore_numerics_flags(flags)


def _reference_errors(outputs32: list, answers: list) -> list:
    """The fp32 reference's relative error per output (None: not compared)."""
    if len(answers) != len(outputs32):
        raise Float64Unavailable(
            f"the float64 reference returned {len(answers)} outputs, the fp32 one {len(outputs32)}"
        )
    errors: list = []
    for index, (ref32, ref64) in enumerate(zip(outputs32, answers)):
        if not (isinstance(ref32, torch.Tensor) and ref32.is_floating_point()):
            errors.append(None)
            continue
        if not isinstance(ref64, torch.Tensor) or ref64.dtype != torch.float64 or ref64.shape != ref32.shape:
            got = f"{ref64.dtype} {tuple(ref64.shape)}" if isinstance(ref64, torch.Tensor) else type(ref64).__name__
            raise Float64Unavailable(
                f"output {index} of the float64 reference is {got}, not float64 {tuple(ref32.shape)}: "
                "the reference casts to a fixed dtype"
            )
        errors.append(relative_error(ref32, ref64))  # None where the answer is all zeros
    if all(error is None for error in errors):
        raise Float64Unavailable("every floating-point output of the float64 reference is zero")
    return errors
