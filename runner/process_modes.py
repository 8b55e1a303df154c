"""Whether a task's speedup is the same in every process (``python -m runner.bench processes``).

kbench times both sides of an evaluation in one worker process, at several placements of their tensors
(``worker/placements.py``), so what depends on where a tensor lies is sampled inside the process. Some kernels
also run at a speed of their own in each process, whatever the placements: an eager im2col on the H100 took
4.68-4.77 ms in six fresh processes (1.9% apart), every input, output and L2 flush buffer placement inside a
process within 0.1%, the SM clock at 1980 MHz throughout (BENCHMARKS.md, thirty-second session). Against a
candidate that does not move with it, such a reference makes the speedup differ between two runs by more than
either run's noise, and no number of samples inside one process shows it.

This module measures it directly: ``processes`` fresh interpreters, one after another, each timing every task
given, its reference and a method's candidate (``reference``: the same Model again), in alternating batches with
kbench's own sampler (CUDA events, the L2 flushed before each sample, its leads; the host clock on a CPU), at the
performance shape with fixed seeds, so that the processes differ only in being processes and in where their
tensors lie. Each process times each side at the evaluation's first placements, in turn (``PLACEMENTS`` input sets,
their large tensors at the evaluation's offsets inside their blocks, ``worker/input_offsets.py``), so what the
evaluation samples inside one process is sampled here too and is no floor. A sweep's worker allocates beside seven
others and after hundreds that freed theirs, and some eager kernels run at one of two speeds by where their input
lies (its offset, it turned out: BENCHMARKS.md, fifty-fifth session): torch_compile's pair moved 3.6% on the eager
permute of permute_nchw_to_nhwc_sdxl_vae_fp16 (4.900 ms in one pass, 5.076 in the other, every placement of a pass
alike), while four fresh processes alone on the idle GPU all ran it at 4.900-4.904 ms (BENCHMARKS.md, fifty-third
session). So on a GPU process ``k`` of ``N`` first holds ``k / (N - 1)`` of ``hold_fraction`` of the device memory
free at its start (``HOLD_FRACTION`` by default; 0: none), and its tensors come after it, at another depth of the
GPU's memory in each process. Per task it reports each process's medians and speedup, their spread between
processes, the noise of one process's speedup, and their ratio: the floor under that method's repeatability on this
GPU. It measures nothing for a run and changes nothing on the device.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from runner.gpu.memory_admission import GIB

# Samples per task and process, taken in batches of this many calls (one synchronisation a batch).
SAMPLES = 120
BATCH = 20
WARMUP_MS = 50.0
# One process may take this long for all its tasks before it is stopped (the error names which it was).
PROCESS_LIMIT_S = 600
INPUT_SEED = 1
# Each process times each side at the evaluation's first placements (``TimingSettings.placements``, one input set
# each, under the evaluation's budget), in turn, batch by batch.
PLACEMENTS = 4
MODEL_SEED = 0
# The most of its free device memory the last process holds before its tensors (the others in proportion), and the
# most that may be asked: the tasks' own tensors need the rest.
HOLD_FRACTION = 0.5
MAX_HOLD_FRACTION = 0.9


def measure_in_this_process(
    task_paths: list[str], device_name: str, shape: str, samples: int, method: str, workdir: str, hold: float = 0.0
) -> dict:
    """Each task's reference and ``method``'s candidate at ``shape`` in this process: per side its samples
    summarised as a measurement's are (``median_noise.summarise``: the median, the quartiles, the median's relative
    standard error). ``device_name`` "auto": the GPU where there is one, else the CPU; ``shape`` "auto": the performance
    shape on a GPU, the small one on a CPU (where the performance shapes take minutes a call). The candidates'
    sources are written to ``workdir``. On a GPU, ``hold`` of the device memory free at the start is held (allocated,
    never written) before anything else, until the end; on a CPU nothing is."""
    import torch

    from runner.methods import METHODS
    from runner.tasks.model import read_native_task
    from runner.worker.input_offsets import InputOffsets
    from runner.worker.loading import build_model, import_file
    from runner.worker.median_noise import summarise
    from runner.worker.placements import timing_inputs
    from runner.worker.protocol import TimingSettings
    from runner.worker.samplers import CudaSampler, HostSampler, run_batch, warm_up

    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_name)
    if shape == "auto":
        shape = "perf" if device.type == "cuda" else "small"
    sampler = (
        CudaSampler(device, cold=True, device_sync=False, l2_multiple=2.0, lead=True)
        if device.type == "cuda"
        else HostSampler()
    )
    produce = METHODS.get(method)
    held = None
    if device.type == "cuda" and hold > 0:
        free, _ = torch.cuda.mem_get_info(device)
        held = torch.empty(int(hold * free) // (2 << 20) * (2 << 20), dtype=torch.uint8, device=device)
    out = {}
    for path in task_paths:
        task = read_native_task(Path(path))
        if shape not in task.shapes:
            raise SystemExit(f"{task.task_id} has no shape {shape!r} (it has {', '.join(task.shapes)})")
        dims = task.shapes[shape]
        module = import_file(task.path, f"kbench_modes_{task.task_id}")
        candidate_path = Path(workdir) / f"{task.task_id}_{method}.py"
        candidate = produce(task, {})
        candidate_path.write_text(candidate.source)
        candidate_module = import_file(candidate_path, f"kbench_modes_{task.task_id}_{method}")
        sides = {
            "reference": build_model(module.Model, module, dims, device, MODEL_SEED),
            "candidate": build_model(candidate_module.ModelNew, module, dims, device, MODEL_SEED),
        }
        # The evaluation's first placements, their large inputs at the evaluation's offsets (input_offsets.py): a
        # spread the evaluation samples away inside one process is no floor under it.
        offsets = InputOffsets()
        placed = TimingSettings(input_sets=1, placements=PLACEMENTS)
        sets, groups = timing_inputs(module, dims, device, INPUT_SEED, placed, offsets)
        calls = {
            side: [(lambda model=model, inputs=sets[group[0]]: model(*inputs)) for group in groups]
            for side, model in sides.items()
        }
        times: dict[str, list[float]] = {side: [] for side in calls}
        rounds = len(groups) * math.ceil(samples / (BATCH * len(groups)))  # each placement as many batches
        per_batch = math.ceil(samples / rounds)
        with torch.no_grad():
            warm_up(
                [call for side_calls in calls.values() for call in side_calls],
                sampler,
                WARMUP_MS,
                labels=[side for side, side_calls in calls.items() for _ in side_calls],
            )
            order = list(calls)
            for turn in range(rounds):
                for side in order:  # alternating batches, each side first in turn: drift hits both
                    count = min(per_batch, samples - len(times[side]))
                    if count > 0:
                        batch = [calls[side][turn % len(groups)]] * count
                        times[side] += run_batch(sampler, batch, labels=[side] * count)[0]
                order.reverse()
        out[task.task_id] = {side: dataclasses.asdict(summarise(values)) for side, values in times.items()}
        out[task.task_id]["candidate_hash"] = candidate.content_hash
        out[task.task_id]["placements"] = len(groups)
        out[task.task_id]["input_offsets"] = offsets.record()
        del sides, calls, sets, offsets
        if device.type == "cuda":
            torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    held_gib = round(held.numel() / GIB, 3) if held is not None else 0.0
    return {"pid": os.getpid(), "device": device_name, "gpu": gpu, "shape": shape, "held_gib": held_gib, "tasks": out}


def process_modes(
    task_paths: list[str],
    processes: int,
    method: str = "reference",
    device: str = "auto",
    shape: str = "auto",
    samples: int = SAMPLES,
    hold_fraction: float = HOLD_FRACTION,
) -> dict:
    """Each task timed in ``processes`` fresh processes, one after another (``measure_in_this_process``), process
    ``k`` holding ``k / (processes - 1) * hold_fraction`` of the device memory free at its start (the module's
    docstring); per task, each side's medians and the speedups, their spreads (slowest over fastest, less one), the
    median noise of one process's speedup, and the speedups' standard deviation over that noise
    (``between_over_noise``: about 1 where the processes differ by chance alone; over 3, the speedup has a
    value of its own in each process). ``largest`` ranks the tasks by the speedup's spread."""
    if not 0 <= hold_fraction <= MAX_HOLD_FRACTION:
        raise ValueError(f"the hold fraction must lie in [0, {MAX_HOLD_FRACTION}], not {hold_fraction}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="kbench-processes-") as workdir:
        for index in range(processes):
            hold = hold_fraction * index / (processes - 1) if processes > 1 else 0.0
            command = [sys.executable, "-m", "runner.process_modes", device, shape, str(samples), method, workdir]
            command += [repr(hold)]  # the share of its free device memory this process holds first
            started = time.perf_counter()
            try:
                done = subprocess.run([*command, *task_paths], capture_output=True, text=True, timeout=PROCESS_LIMIT_S)
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"process {index} ran past {PROCESS_LIMIT_S} s (fewer tasks a call)") from None
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"process {index} failed (exit {done.returncode}): {last}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["wall_s"] = round(time.perf_counter() - started, 2)
            runs.append(result)
    tasks = {task_id: _across_processes([run["tasks"][task_id] for run in runs]) for task_id in runs[0]["tasks"]}
    ranked = sorted(tasks, key=lambda t: -tasks[t]["speedup_spread_pct"])
    return {
        "method": method,
        "device": runs[0]["device"],
        "gpu": runs[0]["gpu"],
        "shape": runs[0]["shape"],
        "samples": samples,
        "hold_fraction": hold_fraction,
        "processes": [{"pid": run["pid"], "wall_s": run["wall_s"], "held_gib": run["held_gib"]} for run in runs],
        "tasks": tasks,
        "largest": ranked[:10],
        "beyond_chance": [t for t in ranked if (tasks[t]["between_over_noise"] or 0) > 3],
    }


def _across_processes(per_process: list[dict]) -> dict:
    """One task's figures over the processes, from each process's ``{side: TimingSummary as a dict}``."""
    reference = [p["reference"]["median_ms"] for p in per_process]
    candidate = [p["candidate"]["median_ms"] for p in per_process]
    speedups = [r / c for r, c in zip(reference, candidate)]
    # A ratio's relative noise: its two medians' together (as ``median_noise.ratio_noise``).
    noise = statistics.median(
        math.hypot(p["reference"]["relative_noise"], p["candidate"]["relative_noise"]) for p in per_process
    )
    between = statistics.stdev(speedups) / statistics.fmean(speedups)
    spread = lambda values: 100 * (max(values) / min(values) - 1)  # noqa: E731
    return {
        "candidate_hash": per_process[0]["candidate_hash"],
        "placements": [p["placements"] for p in per_process],
        "input_offsets": [p["input_offsets"] for p in per_process],
        "reference_ms": reference,
        "candidate_ms": candidate,
        "speedups": speedups,
        "reference_spread_pct": spread(reference),
        "candidate_spread_pct": spread(candidate),
        "speedup_spread_pct": spread(speedups),
        "noise_pct": 100 * noise,
        "between_over_noise": between / noise if noise > 0 else None,
    }


if __name__ == "__main__":
    device_arg, shape_arg, samples_arg, method_arg, workdir_arg, hold_arg, *paths = sys.argv[1:]
    print(
        json.dumps(
            measure_in_this_process(
                paths, device_arg, shape_arg, int(samples_arg), method_arg, workdir_arg, float(hold_arg)
            )
        )
    )
