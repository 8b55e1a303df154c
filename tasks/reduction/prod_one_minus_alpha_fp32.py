"""Transmittance of each ray, prod(1 - alpha) over its samples, in NeRF-style volume rendering."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "reduction",
    "level": 2,
    "dtype": "float32",
    "tags": ["reduction", "rows", "product", "rendering"],
    # perf: one 1920x1080 frame (2073600 rays) with NeRF's 64 coarse + 128 fine samples.
    "shapes": {
        "small": {"rays": 256, "samples": 192},
        "perf": {"rays": 2073600, "samples": 192},
    },
    "flops": "2 * rays * samples",
    "bytes": "4 * (rays * samples + rays)",
    "source": "NeRF volume rendering transmittance",
}


class Model(nn.Module):
    def forward(self, alpha):
        return torch.prod(1.0 - alpha, dim=-1)


def get_inputs(rays, samples):
    # alpha in [0, 0.04) with a density per ray: transmittances spread over (exp(-4), 1].
    density = torch.rand(rays, 1, dtype=torch.float32) * 0.04
    return [torch.rand(rays, samples, dtype=torch.float32) * density]


def get_init_inputs():
    return []
