"""The per-call integrity checks' Triton kernels (``runner/worker/fused_integrity.py``) against the PyTorch paths.

On this machine the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, in a subprocess: the
variable must be set before Triton is imported), with ``available`` opened to CPU tensors; on a GPU,
compiled after ``prepare()`` (``test_gpu.py``). The differing-bytes count must find every changed byte,
the poison must be the bytes ``fill_`` writes for every dtype it fills, and ``call_violation`` and the
poison must come out the same on both paths.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import prepare_in_own_caches, run_kernel_script

pytest.importorskip("triton")

AGREEMENT = r"""
import json, sys
import torch
from runner.worker import fused_integrity, integrity
device = sys.argv[1]
if device == "cuda":
    assert all(isinstance(seconds, float) for seconds in fused_integrity.prepare().values())
    kernels = fused_integrity.available
else:  # the interpreter runs the kernels on CPU tensors
    kernels = lambda tensor: True
launches = {"queue_differing_bytes_each": 0, "fill": 0}
for name in launches:
    def counted(*args, name=name, real=getattr(fused_integrity, name)):
        launches[name] += 1
        return real(*args)
    setattr(fused_integrity, name, counted)


def use_kernels(on):
    fused_integrity.available = kernels if on else (lambda tensor: False)


def garbage(nbytes):
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)


torch.manual_seed(0)
found = {"differing": [], "poison": [], "violations": []}
use_kernels(True)
for n in (1, 7, 4095, 4097, 3 * 4096 + 5):  # within one program, just past one, several
    before = garbage(n)
    row = {"n": n, "equal": fused_integrity.differing_bytes(before.clone(), before), "one": []}
    for at in (0, n // 2, n - 1):
        now = before.clone()
        now[at] ^= 1 << (at % 8)
        row["one"].append(fused_integrity.differing_bytes(now, before))
    now = before.clone()
    now[::3] += 1
    row["many"] = [fused_integrity.differing_bytes(now, before), int((now != before).sum())]
    found["differing"].append(row)

for dtype in fused_integrity.FILLED:
    size = torch.empty(0, dtype=dtype).element_size()
    for shape in ((), (7,), (3, 345)):  # 1035 elements: past one program's 1024 words
        blocks = []
        for on in (True, False):
            use_kernels(on)
            block = garbage(size * torch.Size(shape).numel()).view(dtype).reshape(shape)
            integrity._poison(block)
            blocks.append(block.reshape(-1).view(torch.uint8).cpu())
        found["poison"].append(
            {"dtype": str(dtype)[6:], "shape": shape, "same": torch.equal(*blocks), "first": blocks[0][:size].tolist()}
        )


def flip(tensor, at):
    tensor.view(torch.uint8)[at] ^= 1


mutations = {
    "none": lambda xs: None,
    "first byte": lambda xs: flip(xs[0], 0),
    "middle byte": lambda xs: flip(xs[0], 8194),
    "last byte": lambda xs: flip(xs[0], -1),
    "NaN payload": lambda xs: flip(xs[0], 4 * 17),  # a NaN made another NaN: equal as numbers, not as bytes
    "third input": lambda xs: flip(xs[2], 39),
    "first and third": lambda xs: (flip(xs[0], 5), flip(xs[2], 0)),
    "resized": lambda xs: xs[2].resize_(3),
}
for name, mutate in mutations.items():
    verdicts = []
    for on in (True, False):
        use_kernels(on)
        inputs = [torch.randn(4097, device=device), 3, torch.arange(5, device=device)]
        inputs[0][17] = float("nan")
        snapshots = integrity.snapshot_inputs(inputs)
        integrity.poison_allocator([torch.empty(5, device=device), torch.empty(2, 3, dtype=torch.bool, device=device)])
        mutate(inputs)
        verdicts.append(integrity.call_violation(inputs, snapshots, [torch.ones(2, device=device)], []))
    found["violations"].append({"mutation": name, "kernels": verdicts[0], "torch": verdicts[1]})
found["launches"] = launches
print(json.dumps(found))
"""

# The first element's bytes (little-endian) that ``fill_`` writes: NaN (complex: NaN + 0j), True, the maximum.
POISON_BYTES = {
    "float16": [0x00, 0x7E],
    "bfloat16": [0xC0, 0x7F],
    "float32": [0x00, 0x00, 0xC0, 0x7F],
    "float64": [0, 0, 0, 0, 0, 0, 0xF8, 0x7F],
    "complex64": [0x00, 0x00, 0xC0, 0x7F, 0, 0, 0, 0],
    "complex128": [0, 0, 0, 0, 0, 0, 0xF8, 0x7F] + [0] * 8,
    "bool": [1],
    "int8": [0x7F],
    "uint8": [0xFF],
    "int16": [0xFF, 0x7F],
    "int32": [0xFF, 0xFF, 0xFF, 0x7F],
    "int64": [0xFF] * 7 + [0x7F],
}


def _agreement(device: str) -> dict:
    return json.loads(run_kernel_script(AGREEMENT, device, timeout=300).strip().splitlines()[-1])


def check_agreement(device: str) -> None:
    found = _agreement(device)
    assert len(found["differing"]) == 5
    for row in found["differing"]:
        assert row["equal"] == 0 and row["one"] == [1, 1, 1], row
        assert row["many"][0] == row["many"][1] > 0, row
    assert len(found["poison"]) == 3 * len(POISON_BYTES)
    for case in found["poison"]:
        assert case["same"], case
        assert case["first"] == POISON_BYTES[case["dtype"]], case
    for case in found["violations"]:
        assert case["kernels"] == case["torch"], case
        if case["mutation"] == "none":
            assert case["kernels"] is None
        else:
            position = 2 if case["mutation"] in ("third input", "resized") else 0  # the first that changed
            assert case["kernels"] == ["input_mutated", f"input {position} changed during the call"], case
    # The kernels did judge: every count and poison above, and on the kernels' side of each call_violation, all
    # of a call's inputs in one read from the device (one queue_differing_bytes_each a call).
    assert found["launches"]["queue_differing_bytes_each"] == 5 * 5 + 8
    assert found["launches"]["fill"] >= 3 * len(POISON_BYTES) + 7 * 4


def test_fused_integrity_kernels_agree_with_pytorch_in_the_interpreter():
    check_agreement("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without a CUDA device")
def test_without_a_gpu_the_integrity_checks_stay_on_pytorch(monkeypatch):
    """No CUDA device: ``prepare`` says why it did nothing, nothing takes the kernels, the pre-warm records
    both preparations as not done, and the checks give the PyTorch paths' verdicts."""
    from runner.worker import fused_integrity, integrity, prewarm

    assert fused_integrity.prepare() == {"not done": "no Triton or no CUDA device"}
    assert not fused_integrity.available(torch.ones(3))
    monkeypatch.setattr(prewarm, "PREWARMED", {})
    record = prewarm.prewarm_checks()
    assert record["fused checks"].startswith("not done") and record["fused integrity checks"].startswith("not done")
    x = torch.randn(9)
    snapshots = integrity.snapshot_inputs([x])
    assert integrity.call_violation([x], snapshots, [], []) is None
    x[4] += 1
    assert integrity.call_violation([x], snapshots, [], []) == ("input_mutated", "input 0 changed during the call")


PREPARE = r"""
import json, os, sys, torch
from runner.worker import fused_integrity
where = sys.argv[1]
block = torch.empty(4, device="cuda")
before = fused_integrity.available(block)
variants = fused_integrity.prepare()
compiled = sorted(str(p) for p in __import__("pathlib").Path(where).rglob("*.cubin"))
for dtype in fused_integrity.FILLED:  # every word size and pattern, at an odd size
    fused_integrity.fill(torch.empty(1025, dtype=dtype, device="cuda"), 1)
counts = fused_integrity.differing_bytes(torch.zeros(4097, dtype=torch.uint8, device="cuda"), torch.ones(4097, dtype=torch.uint8, device="cuda"))
after = sorted(str(p) for p in __import__("pathlib").Path(where).rglob("*.cubin"))
print(json.dumps({"variants": variants, "available": [before, fused_integrity.available(block)],
                  "compiled": compiled, "after_calls": after, "counts": counts}))
"""


def check_prepare_fills_its_own_cache(tmp_path) -> None:
    """On a GPU: ``prepare()`` compiles every variant, host only, into ``KBENCH_CHECKS_CACHE`` and nothing into
    the candidates' ``TRITON_CACHE_DIR``; the calls then use those variants (no compile in the job), and the
    kernels serve only once prepared."""
    answer, checks, candidates = prepare_in_own_caches(PREPARE, tmp_path, str(tmp_path / "checks"))
    assert answer["available"] == [False, True]
    variants = answer["variants"]
    assert len(variants) == 5 and all(isinstance(seconds, float) for seconds in variants.values()), variants
    assert len(answer["compiled"]) == 5 and answer["after_calls"] == answer["compiled"]
    assert answer["counts"] == 4097
    assert not list(candidates.rglob("*.cubin"))
