"""Linear with bias followed by SiLU (Swish) in fp16: the first half of a Conformer macaron feed-forward module (w2v-BERT 2.0 / SeamlessM4T speech encoder)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float16",
    "tags": ["gemm", "epilogue", "silu", "bias", "audio", "conformer"],
    # perf: w2v-BERT 2.0 conformer FFN intermediate_dense (1024 -> 4096), 32 clips x 1500 frames
    # (30 s at 20 ms). ~0.4 TFLOP: ~0.7 ms GEMM + ~0.3 ms for the eager SiLU; ~0.9 GB.
    "shapes": {
        "small": {"tokens": 48, "d_model": 64, "d_ff": 256},
        "perf": {"tokens": 48000, "d_model": 1024, "d_ff": 4096},
    },
    "flops": "2 * tokens * d_model * d_ff + 5 * tokens * d_ff",
    "bytes": "2 * (tokens * d_model + d_model * d_ff + d_ff + tokens * d_ff)",
    "source": "Hugging Face SeamlessM4Tv2ConformerFeedForward / Wav2Vec2BertFeedForward: act(intermediate_dense(x)), act = swish",
}


class Model(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.intermediate_dense = nn.Linear(d_model, d_ff, bias=True, dtype=torch.float16)
        nn.init.normal_(self.intermediate_dense.weight, 0.0, 2 * d_model ** -0.5)  # outputs with std ~2
        nn.init.normal_(self.intermediate_dense.bias, 0.0, 0.5)

    def forward(self, x):
        return torch.nn.functional.silu(self.intermediate_dense(x))


def get_inputs(tokens, d_model):
    return [torch.randn(tokens, d_model, dtype=torch.float16)]


def get_init_inputs(d_model, d_ff):
    return [d_model, d_ff]
