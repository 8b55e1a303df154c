# expect: incorrect mismatch
# Returns a copy of the input (right shape and dtype, no alias): the "first input passed through".
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        return x.clone()
