# expect: integrity_violation timed_output_mismatch
# Computes every row while it is being checked, then only the first half (half the work, half
# the time): the output of the last timed call is checked.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5:
            return torch.relu(self.linear(x))
        out = torch.zeros(x.shape[0], self.linear.out_features)
        half = x.shape[0] // 2
        out[:half] = torch.relu(self.linear(x[:half]))
        return out
