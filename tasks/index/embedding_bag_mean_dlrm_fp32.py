"""nn.EmbeddingBag(mode="mean") over fixed-length multi-hot bags of a recommendation model's sparse feature."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "index",
    "level": 1,
    "dtype": "float32",
    "tags": ["embedding_bag", "gather", "reduction", "recsys", "memory-bound"],
    # perf: one DLRM-DCNv2 table shard (4M rows x 128, 2.1 GB), batch 32768 with 100-hot bags
    # (the largest MLPerf multi-hot size): 1.7 GB of rows gathered, ~0.6 ms; 2.1 GB.
    "shapes": {
        "small": {"rows": 1000, "dim": 16, "batch": 8, "bag": 10},
        "perf": {"rows": 4000000, "dim": 128, "batch": 32768, "bag": 100},
    },
    "flops": "batch * bag * dim",
    "bytes": "8 * batch * bag + 4 * batch * bag * dim + 4 * batch * dim",
    "source": "DLRM / TorchRec sparse-feature pooling (MLPerf DLRM-DCNv2 multi-hot Criteo)",
}


class Model(nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(rows, dim, mode="mean", dtype=torch.float32)

    def forward(self, ids):
        return self.bag(ids)


def get_inputs(rows, batch, bag):
    return [torch.randint(0, rows, (batch, bag), dtype=torch.int64)]


def get_init_inputs(rows, dim):
    return [rows, dim]
