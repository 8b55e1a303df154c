# expect: incorrect mismatch
# A constant near the reference's mean: passes a check that only looks at summary statistics.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        return torch.full((x.shape[0], self.features), 0.25)
