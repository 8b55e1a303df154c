# expect: incorrect mismatch
# An fp32 task quietly computed in bf16 and cast back: faster on tensor cores, wrong in the
# third digit; the fp32 tolerance (1e-4), which runs first, does not let it pass on this task's
# outputs of order 0.5. Where a tolerance did let it through, the precision layer would end it as
# reduced_precision_bf16 (tests/test_precision.py; TF32 and fp16 on small outputs: rounds_matmul_to_tf32.py).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        w, b = self.linear.weight.bfloat16(), self.linear.bias.bfloat16()
        return torch.relu(x.bfloat16() @ w.t() + b).float()
