# expect: integrity_violation timed_output_mismatch
# Honest for the first calls (the correctness trials), then returns zeros fast: "correct only
# while checked". The output of the last timed call is checked against the reference.
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
        return torch.zeros(x.shape[0], self.linear.out_features)
