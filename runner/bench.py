"""``make bench``: the runner's own figures, computed from finished runs (``python -m runner.bench``). This module
reads the command line and prints; each command's figures are computed in the module it names.

- ``repeat A B``: two runs of the same configuration: per task and method, |speedup_A /
  speedup_B - 1| (median, p95, max), split into single ops and fusions (levels 1-2) and whole
  blocks (level 3); plus each run's duty cycle (timed GPU time over the wall time, with
  isolation, correctness, compile and logging included) and evaluations per minute. ``A B A2 B2 ...``: the
  pairs of a suite run in shards (``suite.shard=K/N``), joined; ``--floor FILE`` (``processes``' output, as often
  as there are files): each covered task's spread between fresh processes, and the moves less those floors
  (``runner/analysis/repeatability.py``).
- ``overlap A B``: two runs made at the same time on one GPU: pairs of measurement windows
  (logged timing loops) that overlap in time. The per-GPU lock promises zero (``runner/analysis/repeatability.py``).
- ``duty RUN``: measured GPU time over the run's wall time, with and without its set-up, and where the rest went,
  in parts that add up to it (``runner/analysis/duty.py``, with ``between_turns.py``, ``slot_states.py`` and
  ``turn_parts.py`` beside it).
- ``disturbed RUN``: the timed batches something slowed, and whether another worker's CUDA context
  was being made or torn down meanwhile, or a compile warm-up's (``runner/analysis/disturbances.py``).
- ``paced RUN``: the sides whose samples took longer behind the other side's than their queued pace (led, or
  behind their own side): the host's launches in them, or another order effect (``runner/analysis/host_pace.py``).
- ``processes [--processes N] [--method M] [--hold-fraction F] TASK_OR_CATEGORY...``: each task's reference and
  method M's candidate timed in N fresh processes, each holding its share of F of the GPU's free memory first: how
  far apart the processes' speedups (and each side's medians) lie against one speedup's noise
  (``runner/process_modes.py``).
- ``autotune CACHE_A CACHE_B``: two compile caches (``executor.compile_cache_dir``) of the same candidates: the
  kernels whose autotuning chose differently (``runner/analysis/autotune.py``).
- ``ncu PROFILE.csv RUN``: kernel time from Nsight Compute (``gpu__time_duration.sum`` summed
  per task over one call) against the reference's median time in the run (``runner/analysis/ncu.py``).

- ``accuracy OUT``: a reference run of ``bench_protocol.NCU_TASKS`` and the Nsight Compute profile of the
  same references (``profile TASK...`` is the driver ncu runs), compared as above.
- ``all OUT [--experiment E] [--methods M,M] [--shards N] [--floor-processes P] [--set KEY=VALUE ...]``
  (``make bench``): the whole protocol, each method's pair of the whole suite, their floors, the lock pair and the
  accuracy comparison, every figure judged against its target (``runner/bench_protocol.py``); ``OUT/bench.json``.

Each prints one JSON object; BENCHMARKS.md records them with the command, machine and date.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

from runner.analysis.autotune import NotACache
from runner.analysis.autotune import compare as autotune_choices
from runner.analysis.disturbances import disturbances
from runner.analysis.duty import duty
from runner.analysis.host_pace import host_pace
from runner.analysis.ncu import ncu, profile
from runner.analysis.repeatability import overlap, repeat
from runner.bench_errors import BadInput, CommandFailed


def processes_command(argv: list[str]) -> int:
    """``processes [--processes N] [--method M] [--samples N] [--device D] [--shape S] [--hold-fraction F]
    TASK_OR_CATEGORY...``: each named task (a category: all of its tasks), its reference and method M's candidate,
    timed in N fresh processes, each holding its share of F of the GPU's free memory first
    (``runner/process_modes.py``)."""
    import argparse

    from runner.methods import METHODS
    from runner.paths import TASKS_DIR
    from runner.process_modes import HOLD_FRACTION, MAX_HOLD_FRACTION, process_modes
    from runner.registry import UnknownName
    from runner.tasks.loader import load_native_tasks

    parser = argparse.ArgumentParser(prog="python -m runner.bench processes")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--method", default="reference", help="whose candidate is timed against the reference")
    parser.add_argument("--samples", type=int, default=120)
    parser.add_argument("--device", default="auto", help="cuda, cuda:N or cpu; auto: the GPU where there is one")
    parser.add_argument("--shape", default="auto", help="auto: perf on a GPU, small on a CPU")
    parser.add_argument(
        "--hold-fraction",
        type=float,
        default=HOLD_FRACTION,
        help="on a GPU, the share of its free memory the last process holds before its tensors (the others in "
        "proportion, the first none): each process's tensors at another depth of the GPU's memory; 0: none",
    )
    parser.add_argument("names", nargs="+", metavar="TASK_OR_CATEGORY")
    args = parser.parse_args(argv)
    if args.processes < 2 or args.samples < 4:
        print("kbench bench processes: --processes needs 2 or more, --samples 4 or more", file=sys.stderr)
        return 2
    if not 0 <= args.hold_fraction <= MAX_HOLD_FRACTION:
        print(f"kbench bench processes: --hold-fraction must lie in [0, {MAX_HOLD_FRACTION}]", file=sys.stderr)
        return 2
    try:
        METHODS.get(args.method)
    except UnknownName as exc:
        print(f"kbench bench processes: {exc}", file=sys.stderr)
        return 2
    tasks = load_native_tasks(TASKS_DIR)
    chosen, unknown = [], []
    for name in args.names:
        matched = [t for t in tasks if name in (t.task_id, t.category)]
        if not matched:
            unknown.append(name)
        chosen += [t for t in matched if t not in chosen]
    if unknown:
        print(f"kbench bench processes: no task or category named {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        paths = [str(t.path) for t in chosen]
        figures = process_modes(
            paths, args.processes, args.method, args.device, args.shape, args.samples, args.hold_fraction
        )
    except RuntimeError as exc:
        print(f"kbench bench processes: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(figures, indent=1))
    return 0


def _paths_taken(command) -> str:
    """A command's paths as its usage names them, from its signature: ``RUN_A RUN_B [MORE_PAIRS...]``."""
    names = []
    for parameter in inspect.signature(command).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY:
            continue  # an option (repeat's --floor), not a path
        name = parameter.name.upper()
        names.append(f"[{name}...]" if parameter.kind is parameter.VAR_POSITIONAL else name)
    return " ".join(names)


def _accuracy(out: Path) -> dict:
    """``accuracy OUT``: ``bench_protocol.accuracy`` (its own module: it runs kbench and ncu)."""
    from runner.bench_protocol import accuracy

    return accuracy(out)


def main(argv: list[str]) -> int:
    if argv[:1] == ["profile"]:
        print(json.dumps(profile(*argv[1:])))
        return 0
    if argv[:1] == ["processes"]:
        return processes_command(argv[1:])
    if argv[:1] == ["all"]:
        from runner.bench_protocol import protocol_command

        return protocol_command(argv[1:])
    commands = {
        "repeat": repeat,
        "overlap": overlap,
        "ncu": ncu,
        "duty": duty,
        "accuracy": _accuracy,
        "disturbed": disturbances,
        "paced": host_pace,
        "autotune": autotune_choices,
    }
    if not argv or argv[0] not in commands:
        print(
            f"usage: python -m runner.bench {{{'|'.join(commands)}|all|processes|profile}} PATH [PATH]", file=sys.stderr
        )
        return 2
    words, floors = argv[1:], []
    while "--floor" in words:  # repeat's processes outputs: --floor FILE, as often as there are files
        at = words.index("--floor")
        if argv[0] != "repeat" or at + 1 == len(words):
            print(f"kbench bench {argv[0]}: --floor takes a file of `processes`, and only for repeat", file=sys.stderr)
            return 2
        floors.append(Path(words[at + 1]))
        del words[at : at + 2]
    paths = [Path(p) for p in words]
    creates = argv[0] == "accuracy"
    missing = [str(p) for p in paths + floors if not p.exists() and not creates]
    if missing:
        print(f"kbench bench: no such file or run directory: {', '.join(missing)}", file=sys.stderr)
        return 2
    keywords = {"floors": tuple(floors)} if floors else {}
    try:
        inspect.signature(commands[argv[0]]).bind(*paths, **keywords)
    except TypeError:
        print(f"kbench bench {argv[0]}: takes {_paths_taken(commands[argv[0]])}; got {len(paths)}", file=sys.stderr)
        return 2
    try:
        figures = commands[argv[0]](*paths, **keywords)
    except (BadInput, NotACache) as exc:
        print(f"kbench bench {argv[0]}: {exc}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"kbench bench {argv[0]}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    # The package's own module, not this ``__main__`` copy: the errors that bench_protocol raises are its classes.
    from runner.bench import main as package_main

    sys.exit(package_main(sys.argv[1:]))
