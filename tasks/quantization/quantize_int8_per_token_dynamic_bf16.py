"""Dynamic per-token symmetric int8 quantization of bf16 activations, returning int8 values and fp32 scales (W8A8 serving)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "bfloat16",  # the input dtype; outputs are int8 values and fp32 per-token scales
    "tags": ["quantize", "int8", "per-token", "dynamic", "reduction"],
    # perf: a 16384-token prefill batch of Qwen2.5-32B activations (hidden 5120), 168 MB of
    # bf16; eagerly ~4.4 GB moved through fp32 temporaries: ~1.5 ms, ~1 GB peak.
    "shapes": {
        "small": {"tokens": 64, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 5120},
    },
    "flops": "5 * tokens * hidden",
    "bytes": "2 * tokens * hidden + tokens * hidden + 4 * tokens",
    # Numerics contract (integer output): in fp32, scale[t] = amax(|x[t, :]|) / 127.0;
    # q = clamp(round_half_even(x / scale[t]), -127, 127). At most 0.1% of the q may differ from
    # the reference: where x / scale lies within an ulp of a .5 boundary (~1 in 4000 values here),
    # x * (1 / scale) and Triton's default (approximate) fp32 division round differently
    # (torch.compile on an H100: 2 of 16384 q off by one at the small shape).
    "tolerance": {"atol": 0, "rtol": 0, "mismatch_fraction": 0.001},
    "source": "vLLM dynamic_per_token_scaled_int8 / SmoothQuant W8A8 per-token activation quantization",
}


class Model(nn.Module):
    def forward(self, x):
        x = x.float()
        scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
        q = torch.round(x / scale).clamp_(-127, 127).to(torch.int8)
        return q, scale


def get_inputs(tokens, hidden):
    # Tokens of different magnitude (outlier tokens) so that per-token scales differ.
    magnitude = torch.rand(tokens, 1, dtype=torch.float32) * 4 + 0.25
    return [(torch.randn(tokens, hidden, dtype=torch.float32) * magnitude).to(torch.bfloat16)]


def get_init_inputs():
    return []
