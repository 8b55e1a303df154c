"""The warm-up beside the sweep's bookkeeping (``runner/warmup_beside.py``): which warm-ups are told to cut in, and
when, through the file in each one's ``out/``. Real threads and files; every wait is bounded."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

from runner.warmup_beside import WarmupBeside
from runner.worker.protocol import CUT_IN_FILE


class _Warm:
    """A warm-up that places its job's ``out/`` under ``root`` and runs until the test lets it end: what the
    orchestrator's ``warm`` does, without the sandbox."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.placed: dict[str, Path] = {}
        self.release = threading.Event()

    def __call__(self, evaluation, cut_in) -> dict:
        out = self.root / evaluation.eval_id / "out"
        out.mkdir(parents=True)
        cut_in.place(out)
        self.placed[evaluation.eval_id] = out
        assert self.release.wait(10)
        return {"exit_code": 0, "told_when_it_ended": (out / CUT_IN_FILE).exists()}

    def told(self, eval_id: str) -> bool:
        return (self.placed[eval_id] / CUT_IN_FILE).exists()


def _evaluations(count: int) -> list:
    return [SimpleNamespace(eval_id=f"e{k}") for k in range(count)]


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _log(path: Path) -> dict[str, dict]:
    return {line["eval_id"]: line for line in map(json.loads, path.read_text().splitlines())}


def test_the_next_ones_to_start_and_the_one_waited_for_are_told_to_cut_in(tmp_path: Path):
    """Within 2: of the pending e1, e2, e3 the sweep's next two are told (their files written at once, their warm-ups
    running); e3 is not; e0, which the sweep waits for, is told as it waits. Each log line says when it was told."""
    evaluations = _evaluations(4)
    warm = _Warm(tmp_path / "warmup")
    beside = WarmupBeside(evaluations, warm, 4, tmp_path / "warmup.jsonl", cut_in_within=2)
    _until(lambda: len(warm.placed) == 4)
    assert not any(warm.told(e.eval_id) for e in evaluations)
    beside.coming(deque(evaluations[1:]))
    assert [warm.told(e.eval_id) for e in evaluations] == [False, True, True, False]
    waited = threading.Thread(target=beside.wait_for, args=(evaluations[0], threading.Event()), daemon=True)
    waited.start()
    _until(lambda: warm.told("e0"))
    time.sleep(0.3)  # held back longer than the sweep's poll: counted
    warm.release.set()
    waited.join(10)
    beside.close()
    lines = _log(tmp_path / "warmup.jsonl")
    assert {eval_id: line["told_when_it_ended"] for eval_id, line in lines.items()} == {
        "e0": True, "e1": True, "e2": True, "e3": False
    }  # fmt: skip
    assert lines["e3"]["cut_in_told"] is None
    assert all(lines[k]["started"] <= lines[k]["cut_in_told"] <= lines[k]["ended"] for k in ("e0", "e1", "e2"))
    assert beside.summary()["evaluations_held_back"] == 1


def test_a_warm_up_told_before_it_started_finds_its_file_and_one_told_after_it_ended_is_left_alone(tmp_path: Path):
    """One worker: e1 is told while e0's warm-up runs, so its file is there as soon as its own job's directory is;
    e0, told after its warm-up ended and its directory was removed, is not written to (no error)."""
    evaluations = _evaluations(2)
    warm = _Warm(tmp_path / "warmup")
    beside = WarmupBeside(evaluations, warm, 1, tmp_path / "warmup.jsonl", cut_in_within=1)
    _until(lambda: "e0" in warm.placed)
    beside.coming(deque(evaluations[1:]))
    assert "e1" not in warm.placed and not warm.told("e0")
    warm.release.set()
    _until(lambda: "e1" in warm.placed)
    assert warm.told("e1")
    beside.close()
    shutil.rmtree(tmp_path / "warmup" / "e0")
    beside.coming(deque(evaluations))  # e0's directory is gone: nothing to write
    assert not (tmp_path / "warmup" / "e0").exists()
    assert _log(tmp_path / "warmup.jsonl")["e0"]["cut_in_told"] is None


def test_without_a_lead_every_warm_up_cuts_in_and_none_is_told(tmp_path: Path):
    """``cut_in_within`` None (the default): the jobs cut in by themselves; nothing is written, nothing logged."""
    evaluations = _evaluations(2)
    warm = _Warm(tmp_path / "warmup")
    beside = WarmupBeside(evaluations, warm, 2, tmp_path / "warmup.jsonl")
    _until(lambda: len(warm.placed) == 2)
    beside.coming(deque(evaluations))
    waited = threading.Thread(target=beside.wait_for, args=(evaluations[0], threading.Event()), daemon=True)
    waited.start()
    time.sleep(0.1)
    assert not any(warm.told(e.eval_id) for e in evaluations)
    warm.release.set()
    waited.join(10)
    beside.close()
    assert all("cut_in_told" not in line for line in _log(tmp_path / "warmup.jsonl").values())


def test_the_summary_sums_the_warm_ups_windows_and_their_autotuning(tmp_path: Path):
    """Each job's record (``runner/worker/warmup.py``: its token windows, its kernels with the time spent timing their
    configs where it autotuned them) adds to the run's summary; a warm-up the sandbox could not run adds nothing."""
    kernel = {"kind": "inductor", "kernel": "k", "source": "s", "configs": 4, "ran": {"XBLOCK": 128}}

    def warm(evaluation, cut_in) -> dict:
        if evaluation.eval_id == "e2":
            raise OSError("no sandbox")
        return {
            "exit_code": 0,
            "token": {"windows": [[10.0, 10.5, "shared"], [12.0, 12.25, "shared"]]},
            "autotuning": {
                "kernels": [dict(kernel, found_by="miss", benchmark_ms=120.5), dict(kernel, found_by="hit")]
            },
        }

    beside = WarmupBeside(_evaluations(3), warm, 2, tmp_path / "warmup.jsonl")
    beside.close()
    summary = beside.summary()
    assert summary["failed"] == 1
    assert (summary["windows_s"], summary["kernels_autotuned"], summary["autotune_benchmark_s"]) == (1.5, 2, 0.241)
    assert _log(tmp_path / "warmup.jsonl")["e0"]["autotuning"]["kernels"][0]["benchmark_ms"] == 120.5


def test_a_warm_up_lets_go_of_the_token_for_each_compile_only_once_its_queued_device_work_has_run(tmp_path: Path):
    """The warm-up's worker (``runner/worker/warmup.py``) lets go of the token while Dynamo compiles. CUDA runs the
    work queued before (weights, inputs, the last shape's kernels) after the host has moved on, so the worker first
    waits for it (``settle``), the token still held: otherwise a measurement could take its turn beside it. Real
    Dynamo compiles on the CPU (two shapes: two compiles) and a real token; ``settle`` notes the token's mode when
    called (on a GPU it is ``torch.cuda.synchronize``: ``tests/test_gpu.py``)."""
    import torch

    from runner.worker.device_token import SHARED, DeviceToken, create_token_files
    from runner.worker.warmup import compiling_off_the_token

    record: dict = {}
    compiles: list[list[float]] = []
    mode_when_settled: list[str | None] = []
    with DeviceToken(create_token_files(tmp_path / "gpu-0.work"), record) as token:
        with compiling_off_the_token(token, compiles, lambda: mode_when_settled.append(token.mode)):
            token.hold(SHARED)
            compiled = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
            compiled(torch.ones(3))
            compiled(torch.ones(4))
    assert mode_when_settled == [SHARED, SHARED]
    assert len(compiles) == 2 and all(end is not None for _, end in compiles)
    windows = record["windows"]
    assert len(windows) == 3  # before the first compile, between the two, after the second
    for (began, ended), before, after in zip(compiles, windows, windows[1:]):
        assert before[1] <= began and ended <= after[0]
