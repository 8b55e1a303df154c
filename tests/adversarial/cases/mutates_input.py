# expect: integrity_violation input_mutated
# Computes the right answer but scribbles over its input (harmful to any caller that reuses it).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        out = torch.relu(self.linear(x))
        x.zero_()
        return out
