# expect: incorrect mismatch
# Returns freshly allocated, never written memory, hoping the allocator hands back a block that
# still holds the reference's answer. Blocks shaped like the output are poisoned before each call.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        return torch.empty(x.shape[0], self.features)
