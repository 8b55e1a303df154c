"""A pre-norm Llama decoder layer in bf16: RMSNorm, causal GQA attention with RoPE (plain torch), residual, RMSNorm, SwiGLU MLP, residual."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "block",
    "level": 3,
    "dtype": "bfloat16",
    "tags": ["transformer", "attention", "rope", "rmsnorm", "mlp", "llama"],
    # perf: one Llama-3-8B layer (hidden 4096, 32 q / 8 kv heads x 128, intermediate 14336,
    # rope theta 5e5) on 4 sequences x 512 tokens.
    "shapes": {
        "small": {"batch": 2, "seq": 16, "hidden": 64, "heads": 4, "kv_heads": 2, "inter": 128},
        "perf": {"batch": 4, "seq": 512, "hidden": 4096, "heads": 32, "kv_heads": 8, "inter": 14336},
    },
    "flops": (
        "2 * batch * seq * hidden * (2 * hidden + 2 * kv_heads * (hidden // heads) + 3 * inter)"
        " + 4 * batch * seq * seq * hidden"
    ),
    "bytes": (
        "2 * (2 * batch * seq * hidden + 2 * hidden * hidden"
        " + 2 * hidden * kv_heads * (hidden // heads) + 3 * hidden * inter + 2 * hidden)"
    ),
    # 3e-2: about twenty bf16 roundings (norms, projections, RoPE, scores, probabilities,
    # residuals) and reductions of length 4096-14336 on a chain whose outputs are O(1-10);
    # an implementation with fp32 intermediates differs by up to ~2% on individual outputs,
    # and torch.compile's fused kernels by up to 0.033 absolute on the performance shape.
    "tolerance": {"atol": 5e-2, "rtol": 3e-2},
    "source": "HF LlamaDecoderLayer (eager attention), Llama-3-8B",
}


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden, dtype=torch.bfloat16))
        nn.init.normal_(self.weight, 1.0, 0.1)
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Model(nn.Module):
    def __init__(self, hidden, heads, kv_heads, inter, theta=500000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads

        def linear(d_in, d_out):
            layer = nn.Linear(d_in, d_out, bias=False, dtype=torch.bfloat16)
            nn.init.normal_(layer.weight, 0.0, d_in ** -0.5)  # unit-variance outputs
            return layer

        self.input_layernorm = RMSNorm(hidden)
        self.q_proj = linear(hidden, heads * self.head_dim)
        self.k_proj = linear(hidden, kv_heads * self.head_dim)
        self.v_proj = linear(hidden, kv_heads * self.head_dim)
        self.o_proj = linear(heads * self.head_dim, hidden)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.gate_proj = linear(hidden, inter)
        self.up_proj = linear(hidden, inter)
        self.down_proj = linear(inter, hidden)
        inv_freq = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        self.register_buffer("inv_freq", inv_freq)

    def attention(self, x):
        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        freqs = torch.outer(torch.arange(seq, dtype=torch.float32, device=x.device), self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) * self.head_dim ** -0.5
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, -1)
        return self.o_proj(out)

    def forward(self, x):
        h = x + self.attention(self.input_layernorm(x))
        y = self.post_attention_layernorm(h)
        return h + self.down_proj(torch.nn.functional.silu(self.gate_proj(y)) * self.up_proj(y))


def get_inputs(batch, seq, hidden):
    return [torch.randn(batch, seq, hidden, dtype=torch.bfloat16)]


def get_init_inputs(hidden, heads, kv_heads, inter):
    return [hidden, heads, kv_heads, inter]
