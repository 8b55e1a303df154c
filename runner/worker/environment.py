"""What the worker can see of its software and device, for the result's fingerprint."""

from __future__ import annotations

import gc
import os
import platform
import sys

import torch

from runner.worker.host_cpu import allowed_cpus


def worker_environment(device: torch.device) -> dict:
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": _triton_version(),
        "device": str(device),
        "cpu_count": os.cpu_count(),
        # The host CPUs this worker may run on (each batch's own: ``batch_host_cpu`` in samples.json).
        "host_cpus": allowed_cpus(),
        "torch_threads": torch.get_num_threads(),
        "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        # Python's cyclic collector as the job found it: on, with what the process made before the job frozen
        # (runner/worker/evaluate.py); the measurement pauses it (runner/worker/timing.py).
        "python_gc": {"enabled": gc.isenabled(), "frozen_objects": gc.get_freeze_count()},
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            gpu_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            gpu_memory_bytes=props.total_memory,
            sm_count=props.multi_processor_count,
            gpu_uuid=str(getattr(props, "uuid", "")),
            cudnn=torch.backends.cudnn.version(),
        )
    else:
        env["cpu"] = platform.processor() or platform.machine()
    return env


def _triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__
