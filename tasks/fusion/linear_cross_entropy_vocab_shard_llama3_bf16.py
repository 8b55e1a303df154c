"""LM-head GEMM fused with one vocabulary shard's cross-entropy statistics (shard logsumexp and the target's logit), as in vocab-parallel / chunked-vocab losses."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "bfloat16",
    "tags": ["gemm", "epilogue", "logsumexp", "gather", "loss", "llama"],
    # perf: Llama-3-8B lm_head (hidden 4096, vocab 128256) split in 4 shards of 32064 (TP=4),
    # 4 x 2048 training tokens. ~2.15 TFLOP: ~3.6 ms GEMM + ~2.8 ms for the eager upcast and
    # logsumexp over the 8192 x 32064 logits (~8.5 GB moved); ~3 GB of GPU memory.
    "shapes": {
        "small": {"tokens": 32, "hidden": 64, "chunk": 250, "vocab": 1000},
        "perf": {"tokens": 8192, "hidden": 4096, "chunk": 32064, "vocab": 128256},
    },
    "flops": "2 * tokens * hidden * chunk + 4 * tokens * chunk",
    "bytes": "2 * (tokens * hidden + chunk * hidden) + 8 * tokens + 2 * 4 * tokens",
    # The reference rounds the logits to bf16 (the GEMM's output) before upcasting; a fused
    # kernel that keeps its fp32 accumulator differs by up to half a bf16 ulp (0.4% relative).
    "tolerance": {"atol": 1e-3, "rtol": 1e-2},
    "source": "Megatron-LM VocabParallelCrossEntropy (one rank's shard) / Cut Cross-Entropy vocab blocks, Llama-3-8B",
}

SHARD = 1  # this shard covers vocabulary ids [SHARD * chunk, (SHARD + 1) * chunk)


class Model(nn.Module):
    def __init__(self, hidden, chunk):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(chunk, hidden, dtype=torch.bfloat16))
        nn.init.normal_(self.weight, 0.0, 2 * hidden ** -0.5)  # logit std ~2 per unit of input scale
        self.start = SHARD * chunk

    def forward(self, hidden_states, targets):
        logits = torch.nn.functional.linear(hidden_states, self.weight).float()
        lse = torch.logsumexp(logits, dim=-1)
        local = targets - self.start
        in_shard = (local >= 0) & (local < logits.shape[1])
        target_logit = logits.gather(1, local.clamp(0, logits.shape[1] - 1).unsqueeze(1)).squeeze(1)
        # Targets outside this shard contribute 0 (another shard supplies their logit).
        return lse, torch.where(in_shard, target_logit, torch.zeros_like(target_logit))


def get_inputs(tokens, hidden, vocab):
    # Per-token scales spread the logits' std over ~1-4, so the shard logsumexp varies by token.
    scale = torch.rand(tokens, 1, dtype=torch.float32) * 1.5 + 0.5
    return [
        (torch.randn(tokens, hidden, dtype=torch.float32) * scale).to(torch.bfloat16),
        torch.randint(0, vocab, (tokens,), dtype=torch.int64),
    ]


def get_init_inputs(hidden, chunk):
    return [hidden, chunk]
