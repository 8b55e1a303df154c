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
    # Numerics contract (exact): in fp32, scale[t] = amax(|x[t, :]|) / 127.0 (one IEEE division);
    # q = clamp(round_half_even(x / scale[t]), -127, 127). A kernel must divide by the scale:
    # multiplying by its reciprocal is off by one fp32 ulp at times, which gives a q off by
    # one where x / scale lies at or next to a .5 boundary (~1 in 4000 values here).
    "tolerance": {"atol": 0.0, "rtol": 0.0},
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
