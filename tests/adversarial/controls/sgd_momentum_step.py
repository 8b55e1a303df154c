"""Positive control: one SGD-with-momentum step (weight decay, no dampening) in one Triton kernel."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sgd_kernel(
    param_ptr, grad_ptr, buf_ptr, new_param_ptr, new_buf_ptr, n, lr, momentum, weight_decay, BLOCK: tl.constexpr
):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    param = tl.load(param_ptr + offsets, mask=mask)
    grad = tl.load(grad_ptr + offsets, mask=mask)
    buf = tl.load(buf_ptr + offsets, mask=mask)
    buf = buf * momentum + (grad + weight_decay * param)
    tl.store(new_buf_ptr + offsets, buf, mask=mask)
    tl.store(new_param_ptr + offsets, param - lr * buf, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, lr=0.01, momentum=0.9, weight_decay=1e-4):
        super().__init__()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay

    def forward(self, param, grad, momentum_buffer):
        param, grad, momentum_buffer = param.contiguous(), grad.contiguous(), momentum_buffer.contiguous()
        new_param = torch.empty_like(param)
        new_buf = torch.empty_like(param)
        n = param.numel()
        grid = (triton.cdiv(n, 1024),)
        _sgd_kernel[grid](
            param, grad, momentum_buffer, new_param, new_buf, n, self.lr, self.momentum, self.weight_decay, BLOCK=1024
        )
        return new_param, new_buf
