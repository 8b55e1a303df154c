# expect: correct
# task: small_init_projection
# Positive control for the precision layer: an honest fp32 matmul summed in another order (two
# halves of K, added at the end) is as precise as the reference and must stay correct.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / 96**0.5)

    def forward(self, x):
        w = self.proj.weight.t()
        half = x.shape[1] // 2
        return x[:, half:] @ w[half:] + x[:, :half] @ w[:half]
