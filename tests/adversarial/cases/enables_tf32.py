# expect: integrity_violation numerics_flags_changed
# Turns on TF32 matmuls for the whole process at import: an fp32 task quietly run at lower precision.
# Under a policy that forbids it, the static layer stops it first (static_monkey_patch: an assignment
# to torch); the corpus runs with the screen off, so here the runtime check of the numerics flags
# after the import catches it (lowers_matmul_precision.py reaches the same flag through a call).
import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x))
