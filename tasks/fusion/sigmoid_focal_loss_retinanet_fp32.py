"""Sigmoid focal loss (alpha 0.25, gamma 2) on per-anchor class logits against one-hot labels, summed over classes per anchor (RetinaNet / DETR heads)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "fusion",
    "level": 2,
    "dtype": "float32",
    "tags": ["loss", "focal-loss", "sigmoid", "detection", "reduction"],
    # perf: RetinaNet R50-FPN at 800x1333 (P3-P7, 9 anchors per location: 200700 anchors),
    # 80 COCO classes, 4 images per GPU. Eager: ~20 elementwise passes over 257 MB
    # (~13 GB moved, ~4.5 ms); peak ~2 GB.
    "shapes": {
        "small": {"batch": 2, "anchors": 64, "classes": 8},
        "perf": {"batch": 4, "anchors": 200700, "classes": 80},
    },
    "flops": "20 * batch * anchors * classes",
    "bytes": "4 * batch * anchors * classes + 8 * batch * anchors + 4 * batch * anchors",
    # Background anchors have losses ~1e-4: atol is tightened so that zeros cannot pass.
    "tolerance": {"atol": 1e-6, "rtol": 1e-4},
    "source": "torchvision.ops.sigmoid_focal_loss (Lin et al. 2017), reduction='none' then sum over classes",
}


class Model(nn.Module):
    def __init__(self, alpha=0.25, gamma=2.0):
        super().__init__()
        self.alpha, self.gamma = alpha, gamma

    def forward(self, logits, labels):
        # labels == classes marks a background anchor (all-zero one-hot target).
        classes = logits.shape[-1]
        t = (labels[..., None] == torch.arange(classes, device=labels.device)).to(logits.dtype)
        p = torch.sigmoid(logits)
        ce = nn.functional.binary_cross_entropy_with_logits(logits, t, reduction="none")
        p_t = p * t + (1 - p) * (1 - t)
        alpha_t = self.alpha * t + (1 - self.alpha) * (1 - t)
        return (alpha_t * ce * (1 - p_t) ** self.gamma).sum(dim=-1)


def get_inputs(batch, anchors, classes):
    # Logits around the prior-probability bias -log((1 - 0.01) / 0.01) = -4.6; ~10% positive anchors.
    labels = torch.randint(0, classes, (batch, anchors), dtype=torch.int64)
    background = torch.rand(batch, anchors, dtype=torch.float32) < 0.9
    return [
        torch.randn(batch, anchors, classes, dtype=torch.float32) * 2 - 4.6,
        torch.where(background, torch.full_like(labels, classes), labels),
    ]


def get_init_inputs():
    return []
