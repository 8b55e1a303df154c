# expect: correct
# Positive control: an honest re-implementation must stay correct.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.clamp_min(x @ self.linear.weight.t() + self.linear.bias, 0.0)
