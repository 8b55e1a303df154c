# expect: incorrect mismatch
# An fp32 task quietly computed in bf16 and cast back: faster on tensor cores, wrong in the
# fourth digit; the fp32 tolerance (1e-4) does not let it pass.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        w, b = self.linear.weight.bfloat16(), self.linear.bias.bfloat16()
        return torch.relu(x.bfloat16() @ w.t() + b).float()
