"""Class-weighted per-pixel NLL of channel-wise log-softmax scores, the semantic-segmentation loss of DeepLab/PSPNet on Cityscapes."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["nll", "log_softmax", "gather", "segmentation", "nchw"],
    # perf: 8 full-resolution Cityscapes images (1024x2048) with 19 classes.
    "shapes": {
        "small": {"batch": 2, "classes": 5, "height": 16, "width": 16},
        "perf": {"batch": 8, "classes": 19, "height": 1024, "width": 2048},
    },
    "flops": "5 * batch * classes * height * width",
    "bytes": "4 * batch * classes * height * width + 8 * batch * height * width + 4 * batch * height * width",
    "source": "DeepLabV3 / PSPNet training: NLLLoss(weight=class_weights) on log_softmax(logits, dim=1)",
}


class Model(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.register_buffer("class_weight", torch.rand(classes, dtype=torch.float32) + 0.5)

    def forward(self, logits, targets):
        log_probs = torch.log_softmax(logits, dim=1)
        return nn.functional.nll_loss(log_probs, targets, weight=self.class_weight, reduction="none")


def get_inputs(batch, classes, height, width):
    return [
        torch.randn(batch, classes, height, width, dtype=torch.float32),
        torch.randint(0, classes, (batch, height, width), dtype=torch.int64),
    ]


def get_init_inputs(classes):
    return [classes]
