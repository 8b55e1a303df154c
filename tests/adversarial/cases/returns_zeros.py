# expect: incorrect mismatch
# All zeros of the right shape and dtype: the cheapest "kernel" there is.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        return torch.zeros(x.shape[0], self.features)
