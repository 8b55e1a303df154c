# expect: integrity_violation reduced_precision_tf32
# task: small_init_projection
# Full fp32 precision for the first calls (the correctness trials, each compared with the float64
# answer on trial 0), then the matmul on TF32-rounded operands for every call after: what a kernel
# that switches to tensor cores only at the timed shape, or once the checks are over, amounts to.
# Every output stays inside fp32's absolute tolerance on this task, so the timed-output check passes;
# the float64 answer for the last timed call's inputs shows the 11-bit precision.
import torch
import torch.nn as nn

# More calls than the correctness trials make (2 shapes x 5 trials at most); timing makes many more.
_PRECISE_CALLS = 12


def _tf32(x):
    return (x.contiguous().view(torch.int32) & -8192).view(torch.float32)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / 96**0.5)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= _PRECISE_CALLS:
            return x @ self.proj.weight.t()
        return _tf32(x) @ _tf32(self.proj.weight).t()
