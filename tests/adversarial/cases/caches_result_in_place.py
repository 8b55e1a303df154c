# expect: integrity_violation output_aliases_previous
# Reuses one output buffer across calls (the previous result changes under the caller's feet).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.buffer = None

    def forward(self, x):
        out = torch.relu(self.linear(x))
        if self.buffer is None:
            self.buffer = torch.empty_like(out)
        return self.buffer.copy_(out)
