"""An honest Triton kernel, run through Triton's interpreter on the CPU, is judged correct.

The same candidate file runs compiled on a GPU; here ``TRITON_INTERPRET=1`` is passed into
the sandbox through ``executor.env_passthrough`` (nothing else of the host's environment is).
"""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import FAST_TIMING, kbench, make_kernelbench_dir, results_of, write_candidates

pytest.importorskip("triton")

TASK = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    n = 4096


    class Model(nn.Module):
        def forward(self, x, y):
            return torch.sigmoid(x) * y + 1.0


    def get_inputs():
        return [torch.randn(n), torch.randn(n)]


    def get_init_inputs():
        return []
    """
)

TRITON_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gate_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.sigmoid(x) * y + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        _gate_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
"""


def test_triton_kernel_under_interpreter(tmp_path):
    suite = make_kernelbench_dir(tmp_path / "kb", ["1_gate"], TASK)
    cands = write_candidates(
        tmp_path / "cands",
        {
            "1_gate": TRITON_CANDIDATE,
        },
    )
    bad = write_candidates(tmp_path / "bad", {"1_gate": TRITON_CANDIDATE.replace("* y + 1.0", "* y + 1.5")})
    for folder, expected in ((cands, "correct"), (bad, "incorrect")):
        proc = kbench(
            "run",
            "suite=kernelbench",
            f"suite.path={suite}",
            "method=directory",
            f"method.directory.path={folder}",
            "tracking=off",
            "executor.env_passthrough=[TRITON_INTERPRET]",
            *FAST_TIMING,
            f"run.name=triton_{expected}",
            cwd=tmp_path,
            env={"TRITON_INTERPRET": "1"},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run_dir,) = (tmp_path / "runs").glob(f"*triton_{expected}*")
        (row,) = results_of(run_dir)
        assert row["verdict"] == expected, row
