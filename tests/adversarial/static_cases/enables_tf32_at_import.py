# expect: integrity_violation static_monkey_patch
# Turns on TF32 matmuls for the whole process at import: an fp32 task quietly run at lower precision.
# The static layer sees the assignment to an attribute of torch before anything runs (the runtime
# corpus has the same file, caught there by the numerics-flag check with the screen off).
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
