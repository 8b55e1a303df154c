"""``make bench`` (``python -m runner.bench all OUT``): the measurement protocol of issue 4, run end to end and judged.

For each method (``--methods``, default reference and torch_compile): the suite of ``--experiment`` twice, back to
back, on one compile cache (``OUT/compile-cache``: the second pass measures the kernels the first compiled), in
``--shards N`` parts where one machine's time will not hold a whole pair (shard 1's two passes, then shard 2's, ...),
joined by ``repeat``; then the floors between fresh processes (``processes``) of the tasks over their targets, and the
pair judged against them as well. Then the lock pair (two runs started together on the first device: none of their
measurement windows may overlap) and, where ``ncu`` is installed, the accuracy against Nsight Compute.

Every figure is judged against its target (``targets``: the issue's, ``runner/bench_targets.py``).
``OUT/bench.json`` is written after each step, and a step whose runs (or floors) are already in OUT is not made
again: a protocol cut off, by a machine's time limit for one, goes on where it stopped when the same command runs
again. A pass that fails stops the protocol with one line and exit 1; bad arguments, one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from runner.analysis.ncu import ncu
from runner.analysis.repeatability import overlap, repeat
from runner.bench_errors import BadInput, CommandFailed
from runner.bench_targets import judge, over_targets, print_targets
from runner.paths import CONF_DIR
from runner.rundir import is_finished
from runner.setup_clock import added_parts

# The lock pair's runs: this many evaluations each, fewer where --set gives a smaller suite.limit.
LOCK_EVALUATIONS = 8

# Single-kernel references (in eager PyTorch) of different kinds, for the Nsight Compute comparison.
NCU_TASKS = (
    "gelu_tanh",
    "gelu_erf_bf16",
    "leaky_relu_fp32",
    "hardswish_mobilenetv3_fp16",
    "matmul_square_fp32",
    "linear_bias_fp16",
    "sum_rows_fp32",
    "softmax_attn_scores_fp32",
    "cumsum_rows_fp32",
    "layer_norm_falcon40b_fp32",
    "max_pool2d_resnet50_stem_fp32",
    "add_residual_bf16",
)


# Settings the protocol makes itself: --set may not give them.
_PROTOCOL_KEYS = {
    "experiment": "use --experiment",
    "method": "use --methods",
    "suite.shard": "use --shards",
    "run.name": "each run is named by the protocol",
    "run.out_dir": "the runs go to OUT",
    "run.resume": "the protocol resumes its own runs",
    "executor.compile_cache_dir": "both passes share OUT/compile-cache",
}


class PassFailed(CommandFailed):
    """A run of the protocol (or ncu) ended with a non-zero exit."""


def _run_command(out: Path, name: str, experiment: str, *overrides: str) -> list[str]:
    """``kbench run`` of ``experiment`` into ``out`` as ``name``, without its progress bar."""
    return [
        sys.executable,
        "-m",
        "runner.cli",
        "run",
        f"experiment={experiment}",
        f"run.out_dir={out}",
        f"run.name={name}",
        "run.progress=false",
        *overrides,
    ]


def _finished_run(out: Path, name: str) -> Path | None:
    """The newest run named ``name`` in ``out`` that finished, if any."""
    runs = sorted(out.glob(f"*-{name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((run_dir for run_dir in runs if is_finished(run_dir)), None)


def _key(override: str) -> str:
    """An override's key: ``suite.limit`` of ``suite.limit=111``."""
    return override.partition("=")[0]


def _with(defaults: tuple[str, ...], overrides: tuple[str, ...]) -> list[str]:
    """The protocol's own overrides, less those whose key the user's ``--set`` gives, then the user's."""
    given = {_key(override) for override in overrides}
    return [override for override in defaults if _key(override) not in given] + list(overrides)


def run_pass(out: Path, name: str, experiment: str, *overrides: str) -> Path:
    """One run of ``experiment`` into ``out``, named ``name``: the finished one already there, else made now (an
    unfinished one of the same configuration resumed, ``run.resume=auto``)."""
    done = _finished_run(out, name)
    if done is not None:
        print(f"bench: {name} already finished in {done}", file=sys.stderr)
        return done
    proc = subprocess.run(
        _run_command(out, name, experiment, *overrides),
        stdout=sys.stderr,  # the runs' progress to stderr: stdout is the bench's JSON alone
    )
    done = _finished_run(out, name)
    if proc.returncode != 0 or done is None:
        raise PassFailed(f"the run {name} failed (exit {proc.returncode}); its output is above")
    return done


def lock_pair(out: Path, experiment: str, *overrides: str) -> dict:
    """Two runs started together on the first device; their measurement windows must not overlap. Taken from ``out``
    where an earlier call finished both; else both made now (a lock run made alone would have nothing to clash with)."""
    names = ("lock1", "lock2")
    found = [_finished_run(out, name) for name in names]
    if None in found:
        procs = [
            subprocess.Popen(
                _run_command(out, name, experiment, "run.resume=never", *lock_overrides(overrides)), stdout=sys.stderr
            )
            for name in names
        ]
        codes = [proc.wait() for proc in procs]
        found = [_finished_run(out, name) for name in names]
        if any(codes) or None in found:
            raise PassFailed(f"a lock run failed (exits {codes}); their output is above")
    return overlap(*found)


def lock_overrides(overrides: tuple[str, ...]) -> list[str]:
    """The lock pair's overrides: the reference, untracked, ``LOCK_EVALUATIONS`` evaluations a run, or the user's
    ``suite.limit`` where it is smaller; then the user's other ``--set``. A limit given to shorten the passes (111 of
    the suite's 222, say) had made the pair two runs as long as a pass (BENCHMARKS.md, sixty-fifth session)."""
    limits = [o.partition("=")[2] for o in overrides if _key(o) == "suite.limit"]
    limit = LOCK_EVALUATIONS
    if limits and limits[-1].isdigit() and int(limits[-1]) > 0:
        limit = min(limit, int(limits[-1]))
    own = ("method=reference", "tracking=off", f"suite.limit={limit}")
    return _with(own, tuple(o for o in overrides if _key(o) != "suite.limit"))


def accuracy_overrides(overrides: tuple[str, ...]) -> list[str]:
    """The accuracy run's overrides: its own tasks (``NCU_TASKS``, judged as a count of them), then the user's ``--set``
    less what would select other tasks (``suite``, ``suite.*``: a shard or limit given for the passes would leave
    fewer tasks than the target counts)."""
    own = ("method=reference", "suite=full", f"suite.tasks=[{','.join(NCU_TASKS)}]", "tracking=off")
    kept = tuple(override for override in overrides if _key(override).split(".", 1)[0] != "suite")
    return _with(own, kept)


def accuracy(out: Path, experiment: str = "h100_fullsuite", overrides: tuple[str, ...] = ()) -> dict:
    """kbench's reference medians against Nsight Compute's kernel time, same tasks, same GPU.

    ``--clock-control none`` keeps ncu from touching the clocks (kbench never changes them);
    ``--cache-control all`` flushes caches before each kernel, like kbench's cold mode.
    """
    run_dir = run_pass(out, "accuracy", experiment, *accuracy_overrides(overrides))
    csv_path = out / "ncu.csv"
    with csv_path.open("w") as handle:
        profiled = subprocess.run(
            [
                "ncu",
                "--clock-control",
                "none",
                "--cache-control",
                "all",
                "--nvtx",
                "--print-nvtx-rename",
                "none",
                "--nvtx-include",
                "regex:.*/",
                "--metrics",
                "gpu__time_duration.sum",
                "--csv",
                sys.executable,
                "-m",
                "runner.bench",
                "profile",
                *NCU_TASKS,
            ],
            stdout=handle,
        )
    if profiled.returncode != 0:
        raise PassFailed(f"ncu failed (exit {profiled.returncode}); its output is above")
    return ncu(csv_path, run_dir)


def floors_for(out: Path, method: str, tasks: list[str], processes: int) -> Path | None:
    """``processes --method`` over ``tasks`` (native tasks only), saved as ``OUT/floors-METHOD.json``; the file
    already there when it covers the same tasks."""
    from runner.paths import TASKS_DIR
    from runner.process_modes import process_modes
    from runner.tasks.loader import load_native_tasks

    by_id = {task.task_id: task for task in load_native_tasks(TASKS_DIR)}
    chosen = [task_id for task_id in tasks if task_id in by_id]
    if not chosen:
        return None
    path = out / f"floors-{method}.json"
    try:
        if sorted(json.loads(path.read_text())["tasks"]) == sorted(chosen):
            return path
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        figures = process_modes([str(by_id[task_id].path) for task_id in chosen], processes, method)
    except RuntimeError as exc:
        raise PassFailed(f"the floors of {method}: {exc}") from None
    path.write_text(json.dumps(figures, indent=1))
    return path


def duty_over(runs: list[dict]) -> dict:
    """The duty of passes run one after another (a suite's shards), as one pass's: their measured time over their
    wall time, with and without their set-up; and how much of that wall time only the compile warm-up beside the sweep
    held the GPU (``compile_beside_only_s``: what a cold pass pays that a warm one does not)."""
    measured = sum(run["measured_s"] for run in runs)
    wall = sum(run["wall_s"] for run in runs)
    setup = sum(run["setup_s"] for run in runs)
    setup_parts: dict[str, float] = {}
    for run in runs:  # each shard paid its own set-up: its parts are added up, part by part
        setup_parts = added_parts(setup_parts, run.get("setup_parts_s") or {})
    evaluations = sum(run["evaluations"] for run in runs)
    return {
        "runs": [run["run"] for run in runs],
        "evaluations": evaluations,
        "wall_s": wall,
        "setup_s": setup,
        "setup_parts_s": setup_parts or None,
        "measured_s": measured,
        "compile_beside_only_s": sum((run.get("wall_parts_s") or {}).get("compile_beside_only", 0.0) for run in runs),
        "duty_pct": 100 * measured / wall if wall else None,
        "duty_with_setup_pct": 100 * measured / (wall + setup) if wall else None,
        "evaluations_per_min": 60 * evaluations / wall if wall else None,
    }


def protocol(
    out: Path,
    experiment: str = "h100_fullsuite",
    methods: tuple[str, ...] = ("reference", "torch_compile"),
    shards: int = 1,
    floor_processes: int = 4,
    overrides: tuple[str, ...] = (),
) -> dict:
    """The whole protocol into ``out`` (see the module's docstring); its figures, also in ``OUT/bench.json``."""
    out.mkdir(parents=True, exist_ok=True)
    figures: dict = {
        "protocol": {
            "experiment": experiment,
            "methods": list(methods),
            "shards": shards,
            "floor_processes": floor_processes,
            "overrides": list(overrides),
        },
        "methods": {},
    }

    def save():
        figures["targets"] = judge(figures)
        (out / "bench.json").write_text(json.dumps(figures, indent=1))

    cache = f"executor.compile_cache_dir={(out / 'compile-cache').resolve()}"
    for method in methods:
        pairs: list[Path] = []
        for shard in range(1, shards + 1):
            part = (f"suite.shard={shard}/{shards}",) if shards > 1 else ()
            stem = f"{method}-{shard}of{shards}" if shards > 1 else method
            for side in ("a", "b"):
                own = (f"method={method}", cache, *part)
                pairs.append(run_pass(out, f"{stem}-{side}", experiment, *_with(own, overrides)))
        found = repeat(*pairs)
        duties = {run["run"]: run for run in found["duty"]}
        figures["methods"][method] = {
            "runs": [path.name for path in pairs],
            "repeat": found,
            "duty": {side: duty_over([duties[p.name] for p in pairs[k::2]]) for k, side in enumerate("ab")},
        }
        save()
        if floor_processes >= 2:
            floor = floors_for(out, method, over_targets(found), floor_processes)
            if floor is not None:
                figures["methods"][method]["floors"] = str(floor)
                figures["methods"][method]["repeat"] = repeat(*pairs, floors=(floor,))
                save()
    figures["lock"] = lock_pair(out, experiment, *overrides)
    save()
    if shutil.which("ncu"):
        figures["accuracy"] = accuracy(out, experiment, overrides)
        save()
    return figures


def protocol_command(argv: list[str]) -> int:
    """``all OUT [--experiment E] [--methods M,M] [--shards N] [--floor-processes P] [--set KEY=VALUE ...]``."""
    from runner.methods import METHODS
    from runner.registry import UnknownName

    parser = argparse.ArgumentParser(prog="python -m runner.bench all")
    parser.add_argument("out", type=Path)
    parser.add_argument("--experiment", default="h100_fullsuite")
    parser.add_argument(
        "--methods", default="reference,torch_compile", help="comma-separated; each method's pair in turn"
    )
    parser.add_argument("--shards", type=int, default=1, help="run each pair in N parts (suite.shard=K/N)")
    parser.add_argument("--floor-processes", type=int, default=4, help="fresh processes per floor; 0: no floors")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="an override for every run")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has said why
        return 2 if exc.code else 0
    methods = tuple(name for name in args.methods.split(",") if name)
    try:
        if not (CONF_DIR / "experiment" / f"{args.experiment}.yaml").is_file():
            raise BadInput(f"no experiment named {args.experiment} in conf/experiment")
        if not methods:
            raise BadInput("--methods names no method")
        for name in methods:
            METHODS.get(name)
        if args.shards < 1:
            raise BadInput(f"--shards needs 1 or more, got {args.shards}")
        if args.floor_processes != 0 and args.floor_processes < 2:
            raise BadInput(f"--floor-processes needs 0 (no floors) or 2 or more, got {args.floor_processes}")
        for override in args.set:
            key = _key(override)
            if "=" not in override or not key:
                raise BadInput(f"--set takes KEY=VALUE, got {override!r}")
            if key in _PROTOCOL_KEYS:
                raise BadInput(f"--set {key}=... is the protocol's own: {_PROTOCOL_KEYS[key]}")
        if args.out.exists() and not args.out.is_dir():
            raise BadInput(f"{args.out} is a file, not a folder")
    except (BadInput, UnknownName) as exc:
        print(f"kbench bench all: {exc}", file=sys.stderr)
        return 2
    try:
        figures = protocol(args.out, args.experiment, methods, args.shards, args.floor_processes, tuple(args.set))
    except PassFailed as exc:
        print(f"kbench bench all: {exc}; run the same command again to go on from there", file=sys.stderr)
        return 1
    print_targets(figures["targets"])
    print(json.dumps(figures, indent=1))
    return 0
