# expect: integrity_violation tensor_subclass
# Returns a Tensor subclass, the vehicle of lazy results and patched comparisons.
import torch
import torch.nn as nn


class Sneaky(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x)).as_subclass(Sneaky)
