# expect: integrity_violation static_monkey_patch
# Turns on TF32 matmuls for the whole process at import: an fp32 task quietly run at lower precision.
# The static layer sees the assignment to torch before anything runs (the runtime flag check is
# exercised by lowers_matmul_precision.py, which goes through a call).
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
