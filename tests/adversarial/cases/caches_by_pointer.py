# expect: integrity_violation timed_output_mismatch
# Caches the answer by the input's address and returns a copy (a fresh tensor, so no alias) when
# the same buffer comes again: timing then measures a copy. Fresh inputs per trial keep it honest
# during the correctness trials; after timing, new values are written into a timed input set at
# the same address and the call is checked again.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.cache = {}
        self.trusted_after = 5

    def forward(self, x):
        self.trusted_after -= 1
        key = x.data_ptr()
        if self.trusted_after < 0 and key in self.cache:
            return self.cache[key].clone()
        out = torch.relu(self.linear(x))
        self.cache[key] = out.clone()
        return out
