# expect: integrity_violation no_own_kernel_ran
# Defines an honest Triton kernel but launches it only for a million rows or more, a path the
# checked shapes never take; below that it computes through tensor methods looked up with
# ``getattr`` by names picked at run time by the input's rank, which the static screen (it reads
# names it can fold from the text, not values forward computes) cannot know. It passes the screen
# under own_kernels and its values are right: only the kernel census sees that no kernel of its
# own ran. (Its earlier versions went through ``operator.matmul`` and then through a module-level
# table of torch functions; the screen reads both as compute now, static_cases/operator_functions.py
# and static_cases/torch_ops_in_module_table.py.)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, F: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, F)
    x = tl.load(x_ptr + row * F + cols)
    w = tl.load(w_ptr + cols[:, None] * F + cols[None, :])
    y = tl.sum(w * x[None, :], axis=1) + tl.load(b_ptr + cols)
    tl.store(out_ptr + row * F + cols, tl.maximum(y, 0.0))


# The method names for each input rank: data, not references, so the screen has nothing to follow.
_STEP_NAMES_BY_RANK = {2: ("mm", "add", "relu")}


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        if x.shape[0] >= 1 << 20:
            out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
            _linear_relu_kernel[(x.shape[0],)](x, self.linear.weight, self.linear.bias, out, F=x.shape[1])
            return out
        mm_name, add_name, relu_name = _STEP_NAMES_BY_RANK[x.dim()]
        out = getattr(x, mm_name)(self.linear.weight.T)
        out = getattr(out, add_name)(self.linear.bias)
        return getattr(out, relu_name)()
