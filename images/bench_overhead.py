"""Per-evaluation overhead of the executors: ``local`` against ``docker`` (the CPU image), with and without spares.

    .venv/bin/python images/bench_overhead.py [--evaluations 5] [--gap 15]

One job directory (the reference of a small task, correctness only, no timing) is made by a real
``kbench run``; then each executor runs copies of it, one after another, through its ``run()``:
the figure is the wall time of ``run()`` (for docker without spares: container create → result on
disk → container removed), and the worker's own time inside the job is subtracted to give the
overhead. With ``prestart=1`` the spare gets ``--gap`` seconds (the time other evaluations would
take) before its job, as in a run; the gap is not counted. Also the engine's own share: a container
of the same configuration running ``true``. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runner.executors import ExecutorSettings, make_executor  # noqa: E402
from tests.conftest import make_kernelbench_dir  # noqa: E402


def job_template(root: Path) -> Path:
    suite = make_kernelbench_dir(root / "kb", ["1_small"])
    command = [sys.executable, "-m", "runner.cli", "run", "suite=kernelbench", f"suite.path={suite}"]
    command += ["method=reference", "tracking=off", "run.progress=false", "eval.timing.enabled=false"]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    (job,) = (next((root / "runs").iterdir()) / "jobs").iterdir()
    return job


def fresh_copy(template: Path, root: Path, index: int) -> Path:
    job = root / f"job-{index}"
    shutil.copytree(template, job, ignore=shutil.ignore_patterns("out"))
    (job / "out").mkdir()
    return job


def measure(kind: str, prestart: int, template: Path, root: Path, evaluations: int, gap: float) -> dict:
    settings = ExecutorSettings(timeout_s=300, prestart=prestart, cache_dir=root / f"cache-{kind}-{prestart}")
    executor = make_executor(kind, settings)
    walls, inside = [], []
    try:
        for index in range(evaluations + 1):  # the first one starts the spares: not counted
            job = fresh_copy(template, root / f"{kind}-{prestart}", index)
            if prestart and index:
                time.sleep(gap)
            started = time.perf_counter()
            outcome = executor.run(job, None)
            wall = time.perf_counter() - started
            result = json.loads((job / "out" / "result.json").read_text())
            if result["verdict"]["status"] != "correct" or outcome.exit_code != 0:
                raise SystemExit(f"{kind}: evaluation {index} ended {result['verdict']} / {outcome}")
            if index:
                walls.append(wall)
                inside.append(result["finished_at"] - result["started_at"])
    finally:
        executor.close()
    overhead = [w - i for w, i in zip(walls, inside)]
    return {
        "executor": kind,
        "prestart": prestart,
        "median_s": statistics.median(walls),
        "min_s": min(walls),
        "max_s": max(walls),
        "worker_s": statistics.median(inside),
        "overhead_s": statistics.median(overhead),
    }


def measure_bare_container(root: Path, evaluations: int) -> float:
    """Median seconds for create → start → exit → remove of a container with the executor's configuration
    running ``true``: the engine's own share of the overhead, without Python or torch."""
    from runner.executors.docker import DockerExecutor

    executor = DockerExecutor(ExecutorSettings(cache_dir=root / "cache-bare"))
    slot = root / "bare-slot"
    for folder in (slot / "job" / "out", slot / "ctl"):
        folder.mkdir(parents=True)
    config = {**executor.container_config(slot, None), "command": ["true"]}
    walls = []
    try:
        for _ in range(evaluations):
            started = time.perf_counter()
            container = executor.client.containers.create(**config)
            container.start()
            container.wait()
            container.remove(force=True)
            walls.append(time.perf_counter() - started)
    finally:
        executor.close()
    return statistics.median(walls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=5)
    parser.add_argument("--gap", type=float, default=15.0, help="seconds a spare gets before its job")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbench-overhead-") as tmp:
        root = Path(tmp)
        template = job_template(root)
        rows = [
            measure(kind, prestart, template, root, args.evaluations, args.gap)
            for kind in ("local", "docker")
            for prestart in (0, 1)
        ]
        bare = measure_bare_container(root, args.evaluations)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"{platform.node()}, {platform.platform()}, {os.cpu_count()} CPUs, load {load}, {time.strftime('%Y-%m-%d')}")
    print("| executor | prestart | run() median s | min s | max s | worker's job s | overhead s (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['executor']} | {row['prestart']} | {row['median_s']:.2f} | {row['min_s']:.2f} | "
            f"{row['max_s']:.2f} | {row['worker_s']:.2f} | {row['overhead_s']:.2f} |"
        )
    print(f"\ncontainer only (create, start, `true`, wait, remove; the executor's configuration): {bare:.2f} s median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
