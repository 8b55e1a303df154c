"""Runtime integrity checks on a candidate's call: what it returned and what it touched.

Each check names a reason code; any hit ends the evaluation as ``integrity_violation`` with
the evidence in the message. The checks here need no profiler and run on CPU and GPU alike:
- ``numerics_flags_changed``: the candidate changed global numerics (TF32, matmul precision,
  deterministic algorithms) on import; the flags are restored before anything is measured;
- ``tensor_subclass``: an output is not a plain ``torch.Tensor`` (a lazy or patched subclass);
- ``output_aliases_input``: an output shares storage with an input;
- ``output_aliases_previous``: an output shares storage with the previous call's output, which
  the worker still holds (a result cached across calls);
- ``input_mutated``: an input's bytes changed during the call.
"""

from __future__ import annotations

import torch


def numerics_flags() -> dict:
    return {
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cuda_matmul_allow_fp16_reduced_precision": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuda_matmul_allow_bf16_reduced_precision": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    }


def restore_numerics_flags(flags: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = flags["cuda_matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.use_deterministic_algorithms(flags["deterministic_algorithms"])
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flags[
        "cuda_matmul_allow_fp16_reduced_precision"
    ]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flags[
        "cuda_matmul_allow_bf16_reduced_precision"
    ]


def changed_flags(before: dict, after: dict) -> list[str]:
    return [f"{key}: {before[key]!r} -> {after[key]!r}" for key in before if before[key] != after[key]]


def snapshot_inputs(inputs: list) -> list:
    """Byte copies of the tensor inputs, to see afterwards whether the call wrote to them."""
    return [_bytes(x).clone() if isinstance(x, torch.Tensor) else None for x in inputs]


def call_violation(inputs: list, snapshots: list, outputs: list, previous_outputs: list) -> tuple[str, str] | None:
    """The first integrity violation of one call as ``(reason, evidence)``, or None."""
    for index, out in enumerate(outputs):
        if isinstance(out, torch.Tensor) and type(out) is not torch.Tensor:
            return "tensor_subclass", f"output {index} is a {type(out).__qualname__}, not a plain torch.Tensor"
    for index, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            continue
        for position, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and _shares_storage(out, x):
                return "output_aliases_input", f"output {index} shares storage with input {position}"
        for old in previous_outputs:
            if isinstance(old, torch.Tensor) and _shares_storage(out, old):
                return "output_aliases_previous", f"output {index} shares storage with the previous call's output"
    for position, (x, snap) in enumerate(zip(inputs, snapshots)):
        if snap is not None and not torch.equal(_bytes(x), snap):
            return "input_mutated", f"input {position} changed during the call"
    return None


def _bytes(x: torch.Tensor) -> torch.Tensor:
    return x.detach().reshape(-1).contiguous().view(torch.uint8)


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    sa, sb = a.untyped_storage(), b.untyped_storage()
    start_a, start_b = sa.data_ptr(), sb.data_ptr()
    return start_a < start_b + sb.nbytes() and start_b < start_a + sa.nbytes()
