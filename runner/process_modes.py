"""Whether a task's reference runs at the same speed in every process (``python -m runner.bench processes``).

kbench times both sides of an evaluation in one worker process, at several placements of their tensors
(``worker/placements.py``), so what depends on where a tensor lies is sampled inside the process. Some kernels
also run at a speed of their own in each process, whatever the placements: an eager im2col on the H100 took
4.68-4.77 ms in six fresh processes (1.9% apart), every input, output and L2 flush buffer placement inside a
process within 0.1%, the SM clock at 1980 MHz throughout (BENCHMARKS.md, thirty-second session). Against a
candidate that does not move with it, such a reference makes the speedup differ between two runs by more than
either run's noise, and no number of samples inside one process shows it.

This module measures it directly: ``processes`` fresh interpreters, one after another, each timing the
reference of every task given (the performance shape, fixed seeds, so the processes differ only in being
processes) with kbench's own sampler (CUDA events, the L2 flushed before each sample; the host clock on a CPU).
Per task it reports each process's median, the spread between processes and the noise of one process's median,
and their ratio. It measures nothing for a run and changes nothing on the device.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Samples per task and process, taken in batches of this many calls (one synchronisation a batch).
SAMPLES = 120
BATCH = 20
WARMUP_MS = 50.0
# One process may take this long for all its tasks before it is stopped (the report says which it was).
PROCESS_LIMIT_S = 600
INPUT_SEED = 1
MODEL_SEED = 0


def measure_in_this_process(task_paths: list[str], device_name: str, shape: str, samples: int) -> dict:
    """The median time (ms) of each task's reference at ``shape`` in this process, and the noise of that
    median (relative: the interquartile range over 1.349, times 1.2533 over the root of the sample count).
    ``device_name`` "auto": the GPU where there is one, else the CPU; ``shape`` "auto": the performance shape
    on a GPU, the small one on a CPU (where the performance shapes take minutes a call)."""
    import torch

    from runner.tasks.model import read_native_task
    from runner.worker.loading import build_model, import_file, make_inputs
    from runner.worker.samplers import CudaSampler, HostSampler, run_batch, warm_up

    if device_name == "auto":
        device_name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device_name)
    if shape == "auto":
        shape = "perf" if device.type == "cuda" else "small"
    sampler = (
        CudaSampler(device, cold=True, device_sync=False, l2_multiple=2.0) if device.type == "cuda" else HostSampler()
    )
    out = {}
    for path in task_paths:
        task = read_native_task(Path(path))
        if shape not in task.shapes:
            raise SystemExit(f"{task.task_id} has no shape {shape!r} (it has {', '.join(task.shapes)})")
        dims = task.shapes[shape]
        module = import_file(task.path, f"kbench_modes_{task.task_id}")
        model = build_model(module.Model, module, dims, device, MODEL_SEED)
        inputs = make_inputs(module, dims, device, INPUT_SEED)
        with torch.no_grad():

            def call(model=model, inputs=inputs):
                return model(*inputs)

            warm_up([call], sampler, WARMUP_MS)
            times: list[float] = []
            while len(times) < samples:
                times += run_batch(sampler, [call] * min(BATCH, samples - len(times)))[0]
        median = statistics.median(times)
        quartiles = statistics.quantiles(times, n=4)
        noise = 1.2533 * (quartiles[2] - quartiles[0]) / 1.349 / math.sqrt(len(times)) / median
        out[task.task_id] = {"median_ms": median, "noise": noise, "samples": len(times)}
        del model, inputs
        if device.type == "cuda":
            torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {"pid": os.getpid(), "device": device_name, "gpu": gpu, "shape": shape, "tasks": out}


def process_modes(
    task_paths: list[str], processes: int, device: str = "auto", shape: str = "auto", samples: int = SAMPLES
) -> dict:
    """Each task's reference timed in ``processes`` fresh processes, one after another; per task, the medians,
    their spread (slowest over fastest, less one), the median noise of one process's median, and the medians'
    standard deviation over that noise (``between_over_noise``: about 1 where the processes differ by chance
    alone; over 3, the task runs at a speed of its own in each process)."""
    runs = []
    for index in range(processes):
        command = [sys.executable, "-m", "runner.process_modes", device, shape, str(samples), *task_paths]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROCESS_LIMIT_S)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"process {index} failed (exit {done.returncode}): {last}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["wall_s"] = round(time.perf_counter() - started, 2)
        runs.append(result)
    tasks = {}
    for task_id in runs[0]["tasks"]:
        medians = [run["tasks"][task_id]["median_ms"] for run in runs]
        noise = statistics.median(run["tasks"][task_id]["noise"] for run in runs)
        between = statistics.stdev(medians) / statistics.fmean(medians)
        tasks[task_id] = {
            "medians_ms": medians,
            "spread_pct": 100 * (max(medians) / min(medians) - 1),
            "noise_pct": 100 * noise,
            "between_over_noise": between / noise if noise > 0 else None,
        }
    ranked = sorted(tasks, key=lambda t: -tasks[t]["spread_pct"])
    return {
        "device": runs[0]["device"],
        "gpu": runs[0]["gpu"],
        "shape": runs[0]["shape"],
        "samples": samples,
        "processes": [{"pid": run["pid"], "wall_s": run["wall_s"]} for run in runs],
        "tasks": tasks,
        "largest": ranked[:10],
        "beyond_chance": [t for t in ranked if (tasks[t]["between_over_noise"] or 0) > 3],
    }


if __name__ == "__main__":
    device_arg, shape_arg, samples_arg, *paths = sys.argv[1:]
    print(json.dumps(measure_in_this_process(paths, device_arg, shape_arg, int(samples_arg))))
