# expect: cuda: integrity_violation library_compute_ran; cpu: correct
# A decoy: on every call it launches a kernel of its own that writes zeros into a scratch buffer
# nobody reads, while PyTorch computes the answer (``addmm`` then ``relu``: cuBLAS and aten kernels on
# the GPU). It reaches the PyTorch methods by names it finds at run time in ``dir()`` of a tensor, so
# no name the static screen could resolve or fold is spelled out (not a table at module scope either:
# kernel_on_untaken_path.py's hiding place). It passes the screen under own_kernels, and an own kernel
# does run: only the census's split of library kernels into data movement and compute tells. On the CPU
# Triton's interpreter sees Triton launches only, not PyTorch's ops, so there the decoy ends correct.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, 0.0, mask=offsets < n)


def _method(tensor, prefix, suffix):
    """``tensor``'s method whose name is the first in ``dir(tensor)`` to start and end so."""
    return getattr(tensor, next(name for name in dir(tensor) if name.startswith(prefix) and name.endswith(suffix)))


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        scratch = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        _zero_kernel[(triton.cdiv(scratch.numel(), 1024),)](scratch, scratch.numel(), BLOCK=1024)
        bias = self.linear.bias
        out = _method(bias, "addm", "mm")(x, self.linear.weight.t())  # bias + x @ weight.T
        return _method(out, "rel", "lu")()
