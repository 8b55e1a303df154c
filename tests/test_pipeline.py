"""Pre-started workers and the compile warm-up pass: same verdicts, nothing left behind."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from runner.analysis.duty import duty
from runner.worker.device_token import EXCLUSIVE, SHARED, token_windows
from runner.worker.protocol import STAGE_FILE
from tests.conftest import (
    FAST_TIMING,
    HONEST_CANDIDATE,
    kbench,
    make_kernelbench_dir,
    processes_under,
    reference_and_directory,
    results_of,
    write_candidates,
)

NAMES = ["1_a", "2_b", "3_c"]


def test_prestart_and_warmup(tmp_path: Path):
    """The compile warm-up before the sweep (``executor.warmup_beside=false``): the GPU held, then the sweep."""
    proc, run_dir = _run_with_warm_up(tmp_path, HONEST_CANDIDATE, "executor.warmup_beside=false")
    assert "compile warm-up: 3 candidates" in proc.stdout
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["warmup_s"] > 0
    # Each worker marked the moment it took its job (the memory admission's promise counts from it), before the job
    # began and after the orchestrator handed it over.
    for path in run_dir.glob("jobs/*/out/result.json"):
        result = json.loads(path.read_text())
        taken = float((path.parent / "taken").read_text())
        assert result["environment"]["lane"]["slot"]["admitted"] <= taken <= result["started_at"]
    assert not (run_dir / "warmup").exists()
    assert not list((run_dir / "cache" / "sandboxes").iterdir())
    assert not processes_under(tmp_path)


def _run_with_warm_up(tmp_path: Path, candidate: str, *overrides: str):
    """A reference-and-candidates run over ``NAMES`` (``candidate`` for each), two pre-started workers, two warm-up
    workers; its process and run directory, once every one of its six evaluations is checked correct."""
    suite = make_kernelbench_dir(tmp_path / "kb", NAMES)
    cands = write_candidates(tmp_path / "cands", {name: candidate for name in NAMES})
    proc = kbench(
        *reference_and_directory(suite, cands),
        "tracking=off",
        "executor.prestart=2",
        "executor.warmup_workers=2",
        *overrides,
        *FAST_TIMING,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = results_of(run_dir)
    assert len(rows) == 6 and all(row["verdict"] == "correct" for row in rows), rows
    return proc, run_dir


def _held_windows(run_dir: Path) -> list[dict]:
    out = []
    for path in sorted(run_dir.glob("jobs/*/out/result.json")):
        result = json.loads(path.read_text())
        out.append({"token": result["environment"]["device_token"], "timing": result["timing"]})
    return out


@pytest.mark.parametrize("isolation", ["device", "measurements"])
def test_evaluations_in_flight_take_turns_on_the_device(tmp_path: Path, isolation: str):
    """Three evaluations in flight: all correct, and no two measurements share the device.

    Their device phases hold the token. Under ``executor.measurement_isolation=device`` shared
    ones may overlap each other and an exclusive one (the timed samples) overlaps no other
    evaluation's window; under ``measurements`` it overlaps no other evaluation's exclusive window.
    Each measurement lies inside its own exclusive window, and ``runner.bench duty`` finds no
    overlapping turns.
    """
    names = [f"{i}_t{i}" for i in range(1, 6)]
    suite = make_kernelbench_dir(tmp_path / "kb", names)
    cands = write_candidates(tmp_path / "cands", {name: HONEST_CANDIDATE for name in names})
    proc = kbench(
        *reference_and_directory(suite, cands),
        "tracking=off",
        "executor.prestart=3",
        "executor.in_flight=3",
        f"executor.measurement_isolation={isolation}",
        *FAST_TIMING,
        cwd=tmp_path,
        env={"KBENCH_LOCK_DIR": str(tmp_path / "locks")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    rows = results_of(run_dir)
    assert len(rows) == 10 and all(row["verdict"] == "correct" for row in rows)
    windows = _held_windows(run_dir)
    excluded = {SHARED, EXCLUSIVE} if isolation == "device" else {EXCLUSIVE}
    for index, w in enumerate(windows):
        assert w["token"]["isolation"] == isolation
        own = token_windows(w["token"])
        # Set-up and checks, the warm-up while queued for the turn, the turn, the checks after timing.
        assert [mode for _, _, mode in own] == [SHARED, SHARED, EXCLUSIVE, SHARED]
        (start, end, _), warm_up = own[2], own[1]
        assert warm_up[1] <= start <= w["timing"]["window"][0] <= w["timing"]["window"][1] <= end
        for other in windows[:index] + windows[index + 1 :]:
            clash = [o for o in token_windows(other["token"]) if o[2] in excluded and o[0] < end and start < o[1]]
            assert not clash, f"a measurement shared the device: {own[2]} with {clash}"
            turns = [o for o in token_windows(other["token"]) if o[2] == EXCLUSIVE]
            assert not [o for o in turns if o[0] < warm_up[1] and warm_up[0] < o[1]], "a warm-up beside a measurement"
    # Each drew its own timed inputs after its candidate's import (the seed is recorded).
    seeds = [w["timing"]["input_seed"] for w in windows]
    assert len(set(seeds)) == len(seeds) and all(isinstance(s, int) for s in seeds)
    # They really were in flight together: some evaluation's turns began before another's had
    # ended, and some waited for the token. (Not a threshold on the wait: its length is the
    # machine's speed; a fixed one failed a CI run at 0.047 s.)
    spans = sorted(
        (min(o[0] for o in token_windows(w["token"])), max(o[1] for o in token_windows(w["token"]))) for w in windows
    )
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
    assert max(w["token"]["waited_s"] for w in windows) > 0
    assert Path(windows[0]["token"]["path"]).parent == tmp_path / "locks"
    figures = duty(run_dir)
    assert figures["overlapping_turns"] == 0 and figures["measurement_isolation"] == [isolation]
    assert 0 < figures["measuring_pct"] <= 100
    assert not processes_under(tmp_path)


def _sweep_on_gpu_doubles(tmp_path: Path, monkeypatch, overrides: list[str], gate) -> Path:
    """Six evaluations of the reference method on made-up GPUs: the run directory.

    Test double at the GPU boundary (this machine has no GPU): NVML answers with made-up UUIDs and the
    health gate is ``gate`` (called as the orchestrator calls ``health_gate``). The executor is the real
    local one; the workers, pinned to GPUs that do not exist, end without a result, which is what the
    run records.
    """
    from rich.console import Console

    from runner import orchestrator as orch
    from runner.configure import compose_config, to_settings
    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor
    from runner.paths import SUITES_DIR, TASKS_DIR
    from runner.planning import plan
    from runner.rundir import open_run_dir
    from runner.tasks.suites import SuiteSelection, resolve_suite

    monkeypatch.setenv("KBENCH_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(orch, "read_gpu", gpu_reading_double)
    monkeypatch.setattr(orch, "health_gate", gate)
    names = [f"{i}_g{i}" for i in range(1, 7)]
    suite = make_kernelbench_dir(tmp_path / "kb", names)
    cfg = compose_config(["hardware=h100", "suite=kernelbench", f"suite.path={suite}", "method=reference", *overrides])
    settings = to_settings(cfg)
    settings.progress = False
    tasks = resolve_suite(
        SuiteSelection("kernelbench", "kernelbench", str(suite), (), (), (), None), TASKS_DIR, SUITES_DIR
    )
    run_dir = open_run_dir(tmp_path / "runs", "gpus", "cafe", resume=False)
    executor = LocalExecutor(ExecutorSettings(timeout_s=60, cache_dir=tmp_path / "cache"))
    runner = orch.Orchestrator(settings, run_dir, executor, None, Console(quiet=True), "test")
    try:
        runner.run(plan(tasks, settings))
    finally:
        executor.close()
    assert len(list(run_dir.path.glob("jobs/*/out/result.json"))) == len(names)
    return run_dir.path


def gpu_reading_double(index):
    """NVML's reading of a GPU that is not there (test double: no GPU on this machine)."""
    return {"available": True, "index": index, "uuid": f"GPU-double-{index}"}


def test_two_gpus_share_the_sweep(tmp_path: Path, monkeypatch):
    """``hardware.gpus=[0,1]``: one lane per GPU, each holding its own lock, the evaluations shared."""
    from runner.gpu.nvml import GateOutcome

    run_dir = _sweep_on_gpu_doubles(
        tmp_path,
        monkeypatch,
        ["hardware.gpus=[0,1]"],
        lambda index, *_: GateOutcome(True, 0.0, gpu_reading_double(index), []),
    )
    lanes = {}
    for path in run_dir.glob("jobs/*/out/result.json"):
        result = json.loads(path.read_text())
        lanes.setdefault(result["environment"]["lane"]["lock"], []).append(result["task_id"])
    assert sorted(lanes) == ["gpu-GPU-double-0", "gpu-GPU-double-1"]
    assert sorted(t for tasks in lanes.values() for t in tasks) == [f"level1/{i}_g{i}" for i in range(1, 7)]
    assert all(tasks for tasks in lanes.values())


@pytest.mark.parametrize("in_flight", [1, 2])
def test_the_health_gate_knows_how_many_of_the_runs_evaluations_run_beside(tmp_path: Path, monkeypatch, in_flight):
    """The gate is told how many of the run's own evaluations run on the GPU (it waits out heat and
    throttling only with none: theirs is the run's own load), and each result records it. One in
    flight: never any; two: the second thread's later evaluations start beside the first's."""
    from runner.gpu.nvml import GateOutcome

    told = []

    def gate(index, max_temperature_c, own_pids, cooldown_limit_s, others_running):
        told.append(others_running)
        return GateOutcome(True, 2.0, gpu_reading_double(index), [], others_running, ["temperature 61 C > 56 C"])

    run_dir = _sweep_on_gpu_doubles(tmp_path, monkeypatch, [f"executor.in_flight={in_flight}"], gate)
    records = [
        json.loads(path.read_text())["environment"]["health_gate"] for path in run_dir.glob("jobs/*/out/result.json")
    ]
    recorded = sorted(record["others_running"] for record in records)
    assert recorded == sorted(told) and len(told) == 6
    assert all(record["waited_for"] == ["temperature 61 C > 56 C"] for record in records)  # why it waited, kept
    assert max(told) == in_flight - 1


# A candidate whose forward Dynamo compiles (the eager backend: tracing and guards, no C++ compiler needed).
DYNAMO_CANDIDATE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    def _step(x, weight, bias):
        return torch.clamp_min(x @ weight.t() + bias, 0.0)


    _compiled = torch.compile(_step, backend="eager")


    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.linear = nn.Linear(features, features)

        def forward(self, x):
            return _compiled(x, self.linear.weight, self.linear.bias)
    """
)


def _merged(windows) -> list[tuple[float, float]]:
    """``windows`` (start, end, ...) as disjoint stretches, in order."""
    merged: list[list[float]] = []
    for start, end, *_ in sorted(windows):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@pytest.mark.parametrize("within", [None, 0])
def test_compile_warm_up_beside_the_sweep(tmp_path: Path, within):
    """The default warm-up runs beside the sweep: each warm-up holds the device's token shared for its device work
    and not while Dynamo compiles, no measurement's turn overlaps a warm-up's window, and each evaluation starts
    only after its candidate's warm-up ended. Every warm-up's windows are in the run's warmup.jsonl. With
    ``executor.warmup_cut_in_within=0`` a warm-up's windows cut in only once the sweep waits for it (each is told,
    and says when), at the ready gate before: the same holds."""
    from runner.analysis.duty import duty
    from runner.intervals import union_seconds
    from runner.warmup_beside import warmup_windows

    told = () if within is None else (f"executor.warmup_cut_in_within={within}",)
    proc, run_dir = _run_with_warm_up(tmp_path, DYNAMO_CANDIDATE, "executor.in_flight=2", *told)
    assert "compile warm-up beside the sweep: 3 candidates, 2 at a time" in proc.stdout
    assert ("cutting in for the next 0 to start" in " ".join(proc.stdout.split())) == (within is not None)
    warm = {line["eval_id"]: line for line in warmup_windows(run_dir)}
    assert len(warm) == 3 and all(line["exit_code"] == 0 for line in warm.values()), warm
    if within is not None:  # told once the sweep waited for it, before it ended; None: it ended before that
        told_at = [line["cut_in_told"] for line in warm.values()]
        assert all(at is None or line["started"] <= at <= line["ended"] for at, line in zip(told_at, warm.values()))
    else:
        assert all("cut_in_told" not in line for line in warm.values())
    turns, evaluation_windows = [], []
    for path in run_dir.glob("jobs/*/out/result.json"):
        result = json.loads(path.read_text())
        windows = result["environment"]["device_token"]["windows"]
        turns += [(start, end) for start, end, mode in windows if mode == "exclusive"]
        evaluation_windows += [(start, end) for start, end, _ in windows]
        if result["eval_id"] in warm:  # its evaluation started once its warm-up had ended
            assert result["environment"]["lane"]["slot"]["taken"] >= warm[result["eval_id"]]["ended"]
    assert turns
    for line in warm.values():
        held = [(start, end) for start, end, mode in line["token"]["windows"]]
        compiles = [tuple(window) for window in line["compiles"]]
        assert compiles and all(end is not None for _, end in compiles), line
        # Its end for ``runner.bench disturbed``: the record written after its last compile, before its process ended.
        assert compiles[-1][1] <= line["finished_at"] <= line["ended"], line
        assert held and all(mode == "shared" for *_, mode in line["token"]["windows"]), line
        # The token let go while Dynamo compiled, held again for the compiled call.
        assert all(_overlap(c, h) == 0 for c in compiles for h in held), line
        assert any(h[0] >= compiles[0][1] for h in held), line
        # Never beside a measurement.
        assert all(_overlap(t, h) == 0 for t in turns for h in held), (turns, held)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["warmup_s"] == 0 and manifest["warmup_beside"]["candidates"] == 3
    assert "- the compile warm-up beside the sweep: 3 candidates over" in (run_dir / "report.md").read_text()
    assert manifest["warmup_beside"]["failed"] == 0
    # Each job's record names its autotuned kernels (none here: no Triton on the CPU); the summary sums its windows.
    assert all(line["autotuning"] == {"kernels": [], "autotuned": 0} for line in warm.values()), warm
    windows_s = sum(end - start for line in warm.values() for start, end, _ in line["token"]["windows"])
    assert manifest["warmup_beside"]["windows_s"] == pytest.approx(windows_s, abs=0.002)
    # Their union: each window's seconds once, however many were open (two warm-ups at a time here).
    union = union_seconds((start, end) for line in warm.values() for start, end, _ in line["token"]["windows"])
    assert manifest["warmup_beside"]["windows_union_s"] == pytest.approx(union, abs=0.002)
    assert 0 < union <= windows_s + 0.002
    assert manifest["warmup_beside"]["kernels_autotuned"] == 0 == manifest["warmup_beside"]["autotune_benchmark_s"]
    figures = duty(run_dir)
    assert figures["warmup_beside"]["candidates"] == 3
    # The sweep split at its last warm-up's end: the parts add up to its wall time and to what it measured.
    parts = figures["while_warming_up"].values()
    assert sum(part["wall_s"] for part in parts) == pytest.approx(figures["wall_s"])
    assert sum(part["measured_s"] for part in parts) == pytest.approx(figures["measured_s"])
    assert figures["while_warming_up"]["until_last_warmup"]["wall_s"] > 0
    # The warm-ups' windows with no evaluation's beside them: a wall part of their own, the parts still adding up.
    warmup_segments = _merged(window for line in warm.values() for window in line["token"]["windows"])
    evaluation_segments = _merged(evaluation_windows)
    alone = sum(end - start for start, end in warmup_segments) - sum(
        _overlap(w, e) for w in warmup_segments for e in evaluation_segments
    )
    parts = figures["wall_parts_s"]
    assert parts["compile_beside_only"] == pytest.approx(alone, abs=1e-6)
    assert 0 <= parts["compile_beside_only"] <= manifest["warmup_beside"]["windows_union_s"] + 0.002
    assert sum(parts.values()) == pytest.approx(figures["wall_s"]) and all(value >= 0 for value in parts.values())
    assert not (run_dir / "warmup").exists()
    assert not processes_under(tmp_path)


def test_shared_compile_cache_skips_the_warm_up_it_already_did(tmp_path: Path):
    """Two runs over one ``executor.compile_cache_dir``: the second finds its candidates warmed (the
    cache's ledger) and starts measuring at once; both correct."""
    suite = make_kernelbench_dir(tmp_path / "kb", NAMES)
    cands = write_candidates(tmp_path / "cands", {name: HONEST_CANDIDATE for name in NAMES})
    args = (
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=directory",
        f"method.directory.path={cands}",
        "method.directory.integrity_policy=off",
        "tracking=off",
        "executor.warmup_workers=2",
        f"executor.compile_cache_dir={tmp_path / 'cc'}",
        *FAST_TIMING,
    )
    first = kbench(*args, cwd=tmp_path)
    second = kbench(*args, cwd=tmp_path)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr + second.stderr)[-3000:]
    assert "compile warm-up beside the sweep: 3 candidates" in first.stdout
    assert "compile warm-up" not in second.stdout
    assert len(list((tmp_path / "cc").glob("warmed-*.txt"))) == 1
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all(row["verdict"] == "correct" for run in runs for row in results_of(run))


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_spares_outlive_the_thread_that_asked_for_them(tmp_path: Path):
    """Regression: the parent-death signal fires when the *thread* that started a worker ends. A
    dispatch thread that pre-started spares and then finished its share of the sweep killed them,
    sometimes in the middle of another thread's evaluation (an ``infra_error`` in stage start)."""
    import threading
    import time

    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor

    executor = LocalExecutor(ExecutorSettings(prestart=1, timeout_s=60, cache_dir=tmp_path / "cache"))
    job = tmp_path / "job"
    (job / "out").mkdir(parents=True)  # no job file: the worker refuses it at once
    try:
        asker = threading.Thread(target=executor.run, args=(job, None))
        asker.start()
        asker.join()
        (spare,) = executor.own_pids()
        time.sleep(1.0)
        assert _alive(spare)
    finally:
        executor.close()


def test_a_candidate_shared_by_evaluations_in_flight_is_never_read_half_written(tmp_path: Path):
    """Regression: evaluations in flight prepare their jobs at once; one of them copied the shared
    candidate file while another was still writing it, and its candidate "defined no ModelNew".
    Eight threads store the same 4 MB candidate at the same moment and read it back at once."""
    import threading

    from runner.methods.base import Candidate
    from runner.planning import store_candidate

    candidate = Candidate(HONEST_CANDIDATE + "#" * (4 << 20) + "\n", "directory")
    start = threading.Barrier(8)
    seen: list[str] = []

    def store_and_read():
        start.wait(timeout=10)
        seen.append(store_candidate(tmp_path / "candidates", candidate).read_text())

    threads = [threading.Thread(target=store_and_read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(seen) == 8 and all(text == candidate.source for text in seen)
    assert [p.name for p in (tmp_path / "candidates").iterdir()] == [candidate.content_hash[7:] + ".py"]


def test_the_first_evaluation_gets_its_worker_before_the_spares(tmp_path: Path):
    """Regression: an executor's first evaluation and its spares were started together, so on the H100 its
    worker waited seconds for the spares' CUDA contexts (the driver makes them one after another) and
    pre-warm. Now the spares start once it has started its job; later evaluations refill at once."""
    import shutil

    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor

    suite = make_kernelbench_dir(tmp_path / "kb", NAMES[:1])
    cands = write_candidates(tmp_path / "cands", {NAMES[0]: HONEST_CANDIDATE})
    proc = kbench(*reference_and_directory(suite, cands), "tracking=off", *FAST_TIMING, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (made,) = list((tmp_path / "runs").glob("*/jobs/*"))[:1]
    jobs = []
    for name in ("first", "second"):
        job = tmp_path / name
        shutil.copytree(made, job, ignore=shutil.ignore_patterns("out"))
        (job / "out").mkdir()
        jobs.append(job)
    executor = LocalExecutor(ExecutorSettings(prestart=2, timeout_s=120, cache_dir=tmp_path / "cache"))
    # Whether the first job had started (its stage marker written) as each worker was started.
    marker_seen: list[bool] = []
    start_worker = executor._new_sandbox

    def start_and_note(gpu):
        marker_seen.append((jobs[0] / "out" / STAGE_FILE).exists())
        return start_worker(gpu)

    executor._new_sandbox = start_and_note
    try:
        assert executor.run(jobs[0], None).exit_code == 0
        assert marker_seen == [False, True, True]  # its own worker, then the two spares
        assert len(executor.own_pids()) == 2
        assert executor.run(jobs[1], None).exit_code == 0  # took a spare, refilled at once
        assert marker_seen == [False, True, True, True] and len(executor.own_pids()) == 2
    finally:
        executor.close()


def test_a_run_keeps_the_record_of_each_spare_it_dismissed_without_a_job(tmp_path: Path):
    """Regression: a spare that never got a job left no record, though its CUDA context and pre-warm ran beside the
    run's measurements (on the H100 a four-task run started six such spares as its first evaluations started, and its
    first 2.6 s of batches were slowed beside none of the events known). Now each writes its start's record once done,
    and the run keeps one line per spare dismissed (``spares.jsonl``): two evaluations with two spares ahead leave two
    spares, each line its own worker's record (its pid, when it was ready for a job, before it was dismissed) and the
    executor's (forked, when started). On a CPU a spare makes no context and pre-warms nothing, so
    its line has neither window: ``disturbed`` finds no event in it. A spare whose record is missing (dismissed before
    its start was done) is kept as such."""
    from runner.analysis.disturbances import disturbances
    from runner.executors.base import SPARES_LOG, dismissed_spare

    suite = make_kernelbench_dir(tmp_path / "kb", NAMES[:1])
    cands = write_candidates(tmp_path / "cands", {NAMES[0]: HONEST_CANDIDATE})
    proc = kbench(
        *reference_and_directory(suite, cands), "tracking=off", "executor.prestart=2", *FAST_TIMING, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    lines = [json.loads(line) for line in (run_dir / SPARES_LOG).read_text().splitlines()]
    assert len(lines) == 2
    evaluations = [json.loads(path.read_text()) for path in run_dir.glob("jobs/*/out/result.json")]
    assert len(evaluations) == 2
    last_start = max(result["started_at"] for result in evaluations)
    pids = {line["pid"] for line in lines}
    assert len(pids) == 2
    for line in lines:
        assert line["start_done"] is True and line["started"]["started_by"] == "fork server"
        assert line["started"]["process_started"] <= line["ready_at"] <= line["dismissed_at"]
        assert last_start - 60 < line["ready_at"]  # started during this run
        assert "spare_cuda_context" not in line and "spare_prewarm_window" not in line
    assert disturbances(run_dir)["near"]["cuda_context"]["all"] == 0
    assert not processes_under(tmp_path)
    # A spare dismissed before its start was done wrote no record: kept as such, with the executor's own.
    missing = dismissed_spare(tmp_path / "no-such-record.json", {"started_by": "fork server"}, 5.0)
    assert missing == {"started": {"started_by": "fork server"}, "dismissed_at": 5.0, "start_done": False}


def test_concurrent_refills_start_the_spares_once(tmp_path: Path):
    """Regression: the run's first evaluations refill the spares from their own threads at once, and each
    counted only the spares already waiting, not the ones on their way: on the H100 eight refills of six
    started 18-31 workers in the run's first 15 s, whose CUDA contexts disturbed its first measurements
    and took memory an admitted evaluation then ran out of. Now the ones on their way count; a start that
    fails gives back its place and the ones after it."""
    import threading
    import time

    from runner.executors.base import SparePool

    pool = SparePool()
    started: list[str] = []
    gate = threading.Barrier(8)

    def slow_start(gpu):
        started.append(gpu)
        time.sleep(0.05)  # a worker's start: the others refill meanwhile
        return f"spare {len(started)}"

    def refill():
        gate.wait(timeout=10)
        pool.refill("gpu0", 6, slow_start)

    threads = [threading.Thread(target=refill) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(started) == 6 and len(pool.members()) == 6
    assert pool.take("gpu0", lambda spare: True) == "spare 1"
    pool.refill("gpu0", 6, slow_start)  # one taken: one more
    assert len(started) == 7

    def second_start_fails(gpu):
        if sum(1 for name in started if name == gpu) == 1:
            raise OSError("no more processes")
        return slow_start(gpu)

    with pytest.raises(OSError):
        pool.refill("gpu1", 3, second_start_fails)  # one started, the second failed, the third never tried
    assert len(pool.members()) == 7
    pool.refill("gpu1", 3, slow_start)  # the failed start and the one after it hold no place: two more
    assert [name for name in started if name == "gpu1"] == ["gpu1"] * 3 and len(pool.members()) == 9


def test_chunks_only_where_the_compile_warm_up_has_work(tmp_path: Path, monkeypatch):
    """A chunk's end drains the pipeline, so the sweep is cut into chunks (of 4 × warmup_workers) only
    where a chunk has candidates to warm up: the reference's evaluations, and a second pass whose
    candidates the ledger lists, run as one sweep. The sweeps and warm-ups are recorded, not run."""
    from rich.console import Console

    from runner import orchestrator as orch
    from runner.compile_warmup import CompileWarmup
    from runner.configure import compose_config, to_settings
    from runner.executors.base import ExecutorSettings
    from runner.executors.local import LocalExecutor
    from runner.paths import SUITES_DIR, TASKS_DIR
    from runner.planning import plan
    from runner.rundir import open_run_dir
    from runner.tasks.suites import SuiteSelection, resolve_suite

    names = [f"{i}_t{i}" for i in range(1, 10)]
    suite = make_kernelbench_dir(tmp_path / "kb", names)
    cache = tmp_path / "cache"
    cache.mkdir()
    settings = to_settings(
        compose_config(
            [
                "suite=kernelbench",
                f"suite.path={suite}",
                "method=[reference,torch_compile]",
                "executor.warmup_workers=1",
                "executor.warmup_beside=false",
            ]
        )
    )
    settings.progress = False
    tasks = resolve_suite(
        SuiteSelection("kernelbench", "kernelbench", str(suite), (), (), (), None), TASKS_DIR, SUITES_DIR
    )
    evaluations = plan(tasks, settings)
    sweeps: list[list[str]] = []
    warmed: list[int] = []
    monkeypatch.setattr(orch.Orchestrator, "_sweep", lambda self, chunk, *_: sweeps.append([e.method for e in chunk]))
    monkeypatch.setattr(
        CompileWarmup, "before", lambda self, chunk, lanes: warmed.append(len(self.targets(chunk, lanes)))
    )

    def run(name):
        sweeps.clear()
        warmed.clear()
        executor = LocalExecutor(ExecutorSettings(timeout_s=60, cache_dir=cache, prestart=0))
        run_dir = open_run_dir(tmp_path / "runs", name, "cafe", resume=False)
        runner = orch.Orchestrator(settings, run_dir, executor, None, Console(quiet=True), "test", executor)
        try:
            runner.run(evaluations)
        finally:
            executor.close()
        return runner

    runner = run("first")
    # Nine reference evaluations, then nine torch_compile ones to warm up: chunks of four from the first
    # chunk that holds any, the reference's three chunks joined into it.
    assert [len(sweep) for sweep in sweeps] == [12, 4, 2] and warmed == [3, 4, 2]
    assert sweeps[0] == ["reference"] * 9 + ["torch_compile"] * 3
    # Every candidate warm in the ledger: one sweep.
    runner.compile_warmup.ledger(runner._lanes()).add(
        [(e.task.content_hash, e.candidate.content_hash) for e in evaluations if e.method == "torch_compile"]
    )
    run("second")
    assert [len(sweep) for sweep in sweeps] == [18] and warmed == [0]
