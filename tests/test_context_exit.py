"""A worker's CUDA context reset before its exit (``runner/worker/context_exit.py``); on the GPU: tests/test_gpu.py."""

from __future__ import annotations

import subprocess
import sys


def test_a_process_that_made_no_cuda_context_has_none_to_reset():
    """Where CUDA was never initialised (every CPU worker) the reset does nothing and says so, in a fresh process."""
    code = "from runner.worker.context_exit import reset_cuda_context as r; import torch; print(r(), torch.cuda.is_initialized())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["None", "False"]
