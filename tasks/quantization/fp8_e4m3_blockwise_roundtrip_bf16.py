"""FP8 e4m3 quantize/dequantize round trip with 1x128 block scales (DeepSeek-V3 FP8 activations, QAT fake-quant)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "quantization",
    "level": 2,
    "dtype": "float8_e4m3fn",
    "tags": ["quantize", "dequantize", "fp8", "block-scale"],
    # perf: a 16384-token batch of DeepSeek-V3 activations (hidden 7168), 235 MB of bf16;
    # eagerly ~7 GB moved through fp32 temporaries: ~3 ms.
    "shapes": {
        "small": {"tokens": 16, "hidden": 256},
        "perf": {"tokens": 16384, "hidden": 7168},
    },
    "flops": "6 * tokens * hidden",
    "bytes": "2 * 2 * tokens * hidden",
    # Numerics contract: per block of 128 consecutive values of a row, in fp32,
    # scale = max(amax(|x|), 1e-12) / 448; q = e4m3fn(clamp(x / scale, -448, 448)) with
    # round-to-nearest-even (dividing by scale); out = bf16(fp32(q) * scale). One fp8 ulp is
    # >= 6% relative, so rtol 1e-2 catches a mis-rounded value while allowing bf16 rounding;
    # at most 0.1% of values may be one fp8 quantum off, where x / scale lies within an ulp
    # of a rounding tie and the scale was computed another way (torch.compile: 1.84e-5 off).
    "tolerance": {"atol": 1e-5, "rtol": 1e-2, "mismatch_fraction": 0.001},
    "source": "DeepSeek-V3 fine-grained (1x128) FP8 activation quantization",
}

BLOCK = 128


class Model(nn.Module):
    def forward(self, x):
        tokens, hidden = x.shape
        blocks = x.float().view(tokens, hidden // BLOCK, BLOCK)
        scale = blocks.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 448.0
        q = (blocks / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return (q.float() * scale).view(tokens, hidden).to(torch.bfloat16)


def get_inputs(tokens, hidden):
    return [torch.randn(tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
