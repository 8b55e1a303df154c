"""``runner.bench ncu`` and ``profile``: the references' median times against Nsight Compute's
``gpu__time_duration.sum`` for the same kernels, and the driver ``ncu --nvtx`` profiles."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from runner.analysis.records import job_results

_NVTX_COLUMN = "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg"


def ncu(profile_csv: Path, run_dir: Path) -> dict:
    """``profile_csv``: ``ncu --csv --metrics gpu__time_duration.sum`` output with NVTX range ``task_id``."""
    import csv

    kernel_ms: dict[str, float] = {}
    with profile_csv.open() as handle:
        lines = [line for line in handle if line.startswith('"')]
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        match = re.search(r"<default domain>:([^:]+):", row.get(_NVTX_COLUMN, ""))
        task = match.group(1) if match else row.get("Kernel Name", "?")
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}[unit]
        kernel_ms[task] = kernel_ms.get(task, 0.0) + value * scale
    ours = {r.task_id: r.timing.reference.median_ms for _, r in job_results(run_dir) if r.timing}
    rows = [
        {
            "task": task,
            "ncu_ms": kernel_ms[task],
            "kbench_ms": ours[task],
            "diff_pct": 100 * (ours[task] / kernel_ms[task] - 1),
        }
        for task in sorted(set(kernel_ms) & set(ours))
    ]
    diffs = [abs(r["diff_pct"]) for r in rows]
    return {
        "tasks": rows,
        "max_abs_diff_pct": max(diffs) if diffs else None,
        "median_abs_diff_pct": statistics.median(diffs) if diffs else None,
    }


def profile(*task_ids: str) -> dict:
    """Each task's reference at its performance shape, one call per NVTX range named by the task
    (three warm-up calls outside it): the driver that ``ncu --nvtx`` profiles."""
    import torch

    from runner.paths import TASKS_DIR
    from runner.tasks.loader import load_native_tasks
    from runner.worker.loading import build_model, import_file, make_inputs

    device = torch.device("cuda")
    by_id = {task.task_id: task for task in load_native_tasks(TASKS_DIR)}
    unknown = [task_id for task_id in task_ids if task_id not in by_id]
    if unknown:
        raise SystemExit(f"kbench bench: unknown task(s) {', '.join(unknown)}")
    for task in (by_id[task_id] for task_id in task_ids):
        module = import_file(task.path, f"kbench_profile_{task.task_id}")
        dims = task.shapes["perf"]
        with torch.no_grad():
            model = build_model(module.Model, module, dims, device, 0)
            inputs = make_inputs(module, dims, device, 1)
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push(task.task_id)
            model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
    return {"profiled": list(task_ids)}
