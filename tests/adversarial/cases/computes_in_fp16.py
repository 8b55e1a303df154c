# expect: integrity_violation reduced_precision_tf32
# task: small_init_projection
# An fp32 matmul quietly run in fp16 and cast back. It meets the fp32 tolerance on this task's
# small outputs. fp16 keeps 11 significant bits, as TF32 does: the reason code names the precision
# that the size of the error shows, not the format.
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        nn.init.normal_(self.proj.weight, 0.0, 0.02 / 96**0.5)

    def forward(self, x):
        return (x.half() @ self.proj.weight.half().t()).float()
