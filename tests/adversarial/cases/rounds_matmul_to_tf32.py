# expect: integrity_violation reduced_precision_tf32
# task: small_init_projection
# Clears the low 13 mantissa bits of both fp32 operands before the matmul, as a TF32 tensor core
# reads them (Triton's default tl.dot on a GPU): 11 significant bits instead of 24. The task's
# outputs are small, so the error (~1e-3 relative) stays inside fp32's absolute tolerance; the
# float64 reference shows it.
import torch
import torch.nn as nn


def _tf32(x):
    return (x.contiguous().view(torch.int32) & -8192).view(torch.float32)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / 96**0.5)

    def forward(self, x):
        return _tf32(x) @ _tf32(self.proj.weight).t()
