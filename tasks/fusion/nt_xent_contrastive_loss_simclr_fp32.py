"""SimCLR NT-Xent loss per sample: cosine similarities of both augmented views / temperature, self-similarity masked, cross-entropy against the paired view."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["gemm", "normalize", "contrastive", "loss", "logsumexp", "mask"],
    # perf: SimCLR with batch 4096 (2 x 4096 views) and a 128-d projection head, temperature 0.1.
    # Eager: 17 GFLOP fp32 GEMM (~0.4 ms) + ~2.5 GB moved by the 8192^2 similarity passes (~0.9 ms);
    # peak ~1 GB.
    "shapes": {
        "small": {"batch": 32, "proj_dim": 32},
        "perf": {"batch": 4096, "proj_dim": 128},
    },
    "flops": "2 * (2 * batch) ** 2 * proj_dim + 5 * (2 * batch) ** 2",
    "bytes": "4 * (2 * batch * proj_dim + 2 * batch)",
    "source": "SimCLR (Chen et al. 2020) NT-Xent; lightly / solo-learn NTXentLoss with reduction='none'",
}


class Model(nn.Module):
    def __init__(self, temperature=0.1):
        super().__init__()
        self.temperature = temperature

    def forward(self, z1, z2):
        batch = z1.shape[0]
        z = nn.functional.normalize(torch.cat([z1, z2], dim=0), dim=-1)
        sim = z @ z.t() / self.temperature
        eye = torch.eye(2 * batch, dtype=torch.bool, device=z.device)
        sim = sim.masked_fill(eye, float("-inf"))
        pair = torch.arange(2 * batch, device=z.device).roll(batch)  # view i pairs with i +- batch
        return torch.logsumexp(sim, dim=-1) - sim.gather(-1, pair[:, None]).squeeze(-1)


def get_inputs(batch, proj_dim):
    # The second view is a noisy copy of the first, as augmentations of one image embed nearby.
    z1 = torch.randn(batch, proj_dim, dtype=torch.float32)
    return [z1, z1 + torch.randn(batch, proj_dim, dtype=torch.float32)]


def get_init_inputs():
    return []
