# expect: integrity_violation numerics_flags_changed
# Lowers float32 matmul precision globally (bf16 passes on some backends).
import torch
import torch.nn as nn

torch.set_float32_matmul_precision("medium")


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
