"""Per-token forward KL(teacher || student) between softmaxed logits over the Llama-3 vocabulary (knowledge-distillation loss)."""

import torch
import torch.nn as nn

KBENCH = {
    "category": "loss",
    "level": 2,
    "dtype": "float32",
    "tags": ["kl_div", "log_softmax", "reduction", "vocab", "distillation", "llama"],
    # perf: a 1024-token chunk (losses over a 128k vocabulary are chunked to bound memory,
    # as in torchtune / Liger) of Llama-3-70B -> Llama-3-8B distillation.
    "shapes": {
        "small": {"tokens": 8, "vocab": 512},
        "perf": {"tokens": 1024, "vocab": 128256},
    },
    "flops": "12 * tokens * vocab",
    "bytes": "2 * 4 * tokens * vocab + 4 * tokens",
    "source": "torchtune ForwardKLLoss / Minitron logit distillation",
}


class Model(nn.Module):
    def forward(self, student_logits, teacher_logits):
        student = torch.log_softmax(student_logits, dim=-1)
        teacher = torch.log_softmax(teacher_logits, dim=-1)
        kl = nn.functional.kl_div(student, teacher, reduction="none", log_target=True)
        return kl.sum(dim=-1)


def get_inputs(tokens, vocab):
    # The teacher's sharpness varies per token (confident and uncertain positions), so does the KL.
    sharpness = torch.rand(tokens, 1, dtype=torch.float32) * 2.5 + 0.5
    return [
        torch.randn(tokens, vocab, dtype=torch.float32),
        torch.randn(tokens, vocab, dtype=torch.float32) * sharpness,
    ]


def get_init_inputs():
    return []
