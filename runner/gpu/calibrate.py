"""``kbench doctor --calibrate``: what this GPU achieves, next to the data-sheet peaks in the config.

Measures, with CUDA events (median of 20 timed calls after warm-up), the device-to-device
copy bandwidth (bytes read + written) and the dense matmul rate per dtype (square 8192
GEMMs: fp32 without TF32, TF32, fp16, bf16, int8 through ``torch._int_mm``, fp8 e4m3 through
``torch._scaled_mm``). Read-only: nothing about the GPU's clocks, power or modes is changed;
the TF32 switch is a setting of this process only and is restored.
"""

from __future__ import annotations

import statistics

import torch

from runner.gpu.events import event_times_ms

_SIZE = 8192
_COPY_BYTES = 2 << 30


def _median_ms(fn) -> float:
    return statistics.median(event_times_ms(fn))


def _bandwidth_tbps() -> float:
    source = torch.empty(_COPY_BYTES, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    ms = _median_ms(lambda: target.copy_(source))
    return 2 * _COPY_BYTES / (ms / 1e3) / 1e12


def _matmul_tflops(kind: str) -> float:
    n = _SIZE
    flops = 2 * n**3
    if kind in ("float32", "tf32", "float16", "bfloat16"):
        dtype = torch.float32 if kind in ("float32", "tf32") else getattr(torch, kind)
        a, b = torch.randn(n, n, device="cuda", dtype=dtype), torch.randn(n, n, device="cuda", dtype=dtype)
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
        try:
            ms = _median_ms(lambda: a @ b)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    elif kind == "int8":
        a = torch.randint(-8, 8, (n, n), device="cuda", dtype=torch.int8)
        b = torch.randint(-8, 8, (n, n), device="cuda", dtype=torch.int8)
        ms = _median_ms(lambda: torch._int_mm(a, b))
    elif kind == "float8_e4m3fn":
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), device="cuda")
        ms = _median_ms(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    else:
        raise ValueError(f"no matmul measurement for {kind!r}")
    return flops / (ms / 1e3) / 1e12


def calibrate(peaks: dict | None) -> dict:
    """Achieved figures and, where the config states a peak, the fraction of it."""
    if not torch.cuda.is_available():
        return {"available": False, "why": "no CUDA device"}
    peaks = peaks or {}
    stated = peaks.get("tflops") or {}
    out = {"available": True, "gpu": torch.cuda.get_device_name(), "bandwidth": {}, "matmul_tflops": {}}
    bandwidth = _bandwidth_tbps()
    out["bandwidth"] = {"achieved_tbps": bandwidth, "peak_tbps": peaks.get("bandwidth_tbps")}
    if peaks.get("bandwidth_tbps"):
        out["bandwidth"]["fraction_of_peak"] = bandwidth / peaks["bandwidth_tbps"]
    for kind in ("float32", "tf32", "float16", "bfloat16", "int8", "float8_e4m3fn"):
        try:
            achieved = _matmul_tflops(kind)
        except Exception as exc:  # an op this build or GPU lacks: recorded, not fatal
            out["matmul_tflops"][kind] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        entry = {"achieved": achieved, "peak": stated.get(kind)}
        if stated.get(kind):
            entry["fraction_of_peak"] = achieved / stated[kind]
        out["matmul_tflops"][kind] = entry
    return out
