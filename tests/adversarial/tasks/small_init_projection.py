"""A residual-branch output projection with GPT-2's scaled init: weights ~ N(0, 0.02 / sqrt(2 * 48)).

Its outputs are of order 1e-2, so fp32's absolute tolerance (1e-4) covers an error of ~1e-3
relative: a matmul on TF32 or fp16 operands meets the tolerance, and only the precision layer
(runner/worker/precision.py) sees it. Returning zeros still fails the tolerance.
"""

import torch
import torch.nn as nn

batch_size = 16
features = 32
n_layer = 48


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / (2 * n_layer) ** 0.5)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
