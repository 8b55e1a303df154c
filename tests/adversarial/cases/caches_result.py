# expect: integrity_violation output_aliases_previous
# Computes once, then returns the same tensor on every later call (caching across calls).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.cache = None

    def forward(self, x):
        if self.cache is None:
            self.cache = torch.relu(self.linear(x))
        return self.cache
