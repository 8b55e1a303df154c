"""``runner.bench repeat`` and ``overlap``: two runs of the same configuration compared, task by task (how far each
speedup moved, which side, against the runs' noise and the floors between processes), and two runs made at once on
one GPU (their measurement windows that overlap)."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import NamedTuple

from runner.analysis.autotune import AUTOTUNING_STATES, kernels_alike, kernels_differing, ran_configs
from runner.analysis.clock_mix import moved_at_matched_clocks, read_samples
from runner.analysis.duty import duty
from runner.analysis.records import job_results, samples_path
from runner.bench_errors import BadInput


def _quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {
        "n": len(ordered),
        "median_pct": 100 * statistics.median(ordered),
        "p95_pct": 100 * pick(0.95),
        "max_pct": 100 * ordered[-1],
    }


def repeat(run_a: Path, run_b: Path, *more_pairs: Path, floors: tuple[Path, ...] = ()) -> dict:
    """Per task and method, how far the speedup moved between two runs, which side moved, and whether
    that is more than the runs' own noise estimates allow: ``z`` is the move over the two runs' noises
    together (each run's ratio noise and, where it sampled several placements, their standard error),
    which for well-calibrated estimates exceeds 2 for about one pair in twenty (``beyond_noise``).

    Further pairs (``A2 B2 ...``: the parts of a suite run as ``suite.shard=K/N``, each pair back to back on one
    machine) join the same figures; a task and method may be in one pair only.

    ``floors``: outputs of ``runner.bench processes --method M`` (``process_modes``). Each task and method they
    cover gets ``process_floor_pct``, how far its speedup lay apart between fresh processes, which no measurement
    inside one process narrows; ``beyond_process_floor`` gives each group's moves less their floors (none below
    zero; a task without a floor keeps its whole move)."""
    runs = [run_a, run_b, *more_pairs]
    if len(runs) % 2:
        raise BadInput(f"repeat compares pairs of runs (A B [A2 B2 ...]); got {len(runs)} runs")
    floor_of = _process_floors(floors)

    def speedups(run_dir):
        out = {}
        for job, result in job_results(run_dir):
            if result.verdict.status == "correct" and result.timing:
                key = (job["meta"]["method"], result.task_id)
                timing = result.timing
                medians = (timing.reference.median_ms, timing.candidate.median_ms)
                noise = math.hypot(timing.ratio_noise, timing.placement_noise or 0.0)
                kernels = ran_configs(result.autotuning)
                out[key] = _Measured(
                    level=job["task"]["level"],
                    speedup=timing.speedup,
                    noise=noise,
                    medians_ms=medians,
                    spread=timing.placement_spread,
                    ran=kernels,
                    clock=timing.sm_clock_mhz,
                    samples=samples_path(run_dir, result.eval_id),
                    preloads_not_done=preloads_not_done(result.environment),
                    led=led_shares(timing),
                    waiting={side for side, found in (timing.waits_for_device or {}).items() if found},
                )
        return out

    paired: dict[tuple[str, str], tuple[_Measured, _Measured]] = {}
    for first_run, second_run in zip(runs[0::2], runs[1::2]):
        a, b = speedups(first_run), speedups(second_run)
        for key in set(a) & set(b):
            if key in paired:
                raise BadInput(f"{key[1]} ({key[0]}) is in more than one pair of runs")
            paired[key] = (a[key], b[key])
    deltas: dict[str, list[float]] = {}
    beyond_floor: dict[str, list[float]] = {}
    samples_of: dict[tuple[str, str], tuple[Path, Path]] = {}  # each pair's samples files
    moved = []
    for key in sorted(paired):
        first, second = paired[key]
        group = f"{key[0]}, {'blocks (level 3)' if first.level >= 3 else 'ops and fusions (levels 1-2)'}"
        delta = abs(first.speedup / second.speedup - 1)
        deltas.setdefault(group, []).append(delta)
        noise = math.hypot(first.noise, second.noise)
        row = {
            "method": key[0],
            "task": key[1],
            "group": group,
            "abs_delta_pct": 100 * delta,
            "speedups": [first.speedup, second.speedup],
            "noise_pct": [100 * first.noise, 100 * second.noise],
            "placement_spread_pct": [None if s is None else 100 * s for s in (first.spread, second.spread)],
            # Which side moved: each side's median from the first run to the second, in percent.
            "reference_moved_pct": 100 * (second.medians_ms[0] / first.medians_ms[0] - 1),
            "candidate_moved_pct": 100 * (second.medians_ms[1] / first.medians_ms[1] - 1),
            "z": delta / noise if noise > 0 else math.inf,
            # Whether both runs' candidates ran their kernels with the same configs (AUTOTUNING_STATES); where they
            # did not, which kernels differed.
            "autotuning": kernels_alike(first.ran, second.ran),
            # Each run's median SM clock over its kept batches.
            "sm_clock_mhz": [first.clock, second.clock],
            # Whose kernels the worker could not load by capture at some shape, in either run (``preloads_not_done``).
            "preload_not_done": sorted(first.preloads_not_done | second.preloads_not_done),
            # Each run's share of each side's samples that started behind a lead, in percent (``led_shares``).
            "led_pct": [first.led, second.led],
            # The sides whose wait probe found their calls waiting for the device, in either run
            # (``timing.waits_for_device``): their time is the host's pace between kernels, and what else the host and
            # the driver do meanwhile moves it.
            "waits_for_device": sorted(first.waiting | second.waiting),
        }
        if row["autotuning"] == "different":
            row["kernels_differing"] = kernels_differing(first.ran, second.ran)
        if floors:
            row["process_floor_pct"] = floor = floor_of.get(key)
            beyond_floor.setdefault(group, []).append(max(0.0, delta - (floor or 0.0) / 100))
        moved.append(row)
        samples_of[key] = (first.samples, second.samples)
    beyond = [row for row in moved if row["z"] > 2]
    largest = sorted(moved, key=lambda row: -row["abs_delta_pct"])[:_LARGEST]
    for row in largest:  # whether the clocks explain the move (runner/analysis/clock_mix.py): their samples read
        first_raw, second_raw = (read_samples(path) for path in samples_of[(row["method"], row["task"])])
        row["at_matched_clocks"] = moved_at_matched_clocks(first_raw, second_raw) if first_raw and second_raw else None
    figures = {
        "pairs": len(paired),
        "runs": [path.name for path in runs],
        "abs_delta_speedup": {group: _quantiles(values) for group, values in sorted(deltas.items())},
        "beyond_noise": {
            "z_median": statistics.median(row["z"] for row in moved) if moved else None,
            "z_over_2": len(beyond),
            "z_over_2_pct": 100 * len(beyond) / len(moved) if moved else None,
        },
        # How many pairs ran their autotuned kernels alike (runner/worker/autotuning.py): two cold compiles may not.
        "autotuning": {state: sum(row["autotuning"] == state for row in moved) for state in AUTOTUNING_STATES},
        # The pairs whose worker's preload capture failed at some shape (a host read inside it, say), among all and
        # among the largest: they held 5 of torch_compile's 11 largest moves on the H200 (fifty-seventh session), yet
        # on an H100 their references moved as much as their candidates (|moved| median 0.137% and 0.139% where the
        # candidate's capture failed in both runs, 0.067% and 0.065% where none did: the kinds of task, not the
        # capture; seventy-sixth session).
        "preload_not_done": {
            "pairs": sum(bool(row["preload_not_done"]) for row in moved),
            "in_largest": sum(bool(row["preload_not_done"]) for row in largest),
        },
        # The pairs with a side found waiting for the device (``waits_for_device`` above), among all and the largest.
        "waits_for_device": {
            "pairs": sum(bool(row["waits_for_device"]) for row in moved),
            "in_largest": sum(bool(row["waits_for_device"]) for row in largest),
        },
        # Which tasks moved most: a quantile over the target is a question about these.
        "largest": largest,
        "duty": [duty(run) for run in runs],
    }
    if floors:
        figures["beyond_process_floor"] = {
            "floors": [str(path) for path in floors],
            "tasks_with_a_floor": sum(1 for key in paired if key in floor_of),
            "abs_delta_speedup": {group: _quantiles(values) for group, values in sorted(beyond_floor.items())},
        }
    return figures


class _Measured(NamedTuple):
    """One task and method's measurement in one run, as ``repeat`` compares it with the other run's."""

    level: int
    speedup: float
    noise: float  # the ratio noise and the placements' standard error together
    medians_ms: tuple[float, float]  # reference, candidate
    spread: float | None  # the placements' spread
    ran: object  # the autotuned kernels' configs (``ran_configs``)
    clock: float | None  # median SM clock
    samples: Path
    preloads_not_done: set[str]
    led: dict | None  # ``led_shares``
    waiting: set[str]  # the sides found waiting for the device (``timing.waits_for_device``)


def led_shares(timing) -> dict | None:
    """Per side, the share of its samples that started behind a lead (``queue_lead.QueueLead``: the GPU's queue held
    less than their host time), in percent; None where the measurement did not lead (the host clock,
    ``eval.timing.lead_dry_queue`` off, or a run from before the fifty-eighth session)."""
    if timing.led_samples is None:
        return None
    sides = {"reference": timing.reference, "candidate": timing.candidate}
    return {side: 100 * timing.led_samples.get(side, 0) / max(summary.samples, 1) for side, summary in sides.items()}


def preloads_not_done(environment: dict) -> set[str]:
    """The sides ("reference", "candidate") whose preload (``runner/worker/preload.py``) recorded a shape as not
    done: its capture failed. A preload not tried at all (no CUDA device, or switched off) is no failure."""
    records = {"reference": "preloaded_kernels", "candidate": "preloaded_candidate"}
    return {
        side
        for side, record in records.items()
        if any(
            str(state).startswith("not done")
            for state in ((environment.get(record) or {}).get("shapes") or {}).values()
        )
    }


def _process_floors(paths: tuple[Path, ...]) -> dict[tuple[str, str], float]:
    """``{(method, task): speedup spread between processes, in percent}`` from ``processes`` outputs."""
    floors: dict[tuple[str, str], float] = {}
    for path in paths:
        try:
            figures = json.loads(Path(path).read_text())
            covered = {(figures["method"], task): row["speedup_spread_pct"] for task, row in figures["tasks"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise BadInput(f"{path} is not the output of `python -m runner.bench processes`") from None
        clashes = sorted(covered.keys() & floors.keys())
        if clashes:
            raise BadInput(f"{clashes[0][1]} ({clashes[0][0]}) has a floor in more than one file")
        floors |= covered
    return floors


_LARGEST = 10  # tasks listed by ``repeat`` as having moved most between the passes


def overlap(run_a: Path, run_b: Path) -> dict:
    def windows(run_dir):
        return [tuple(r.timing.window) for _, r in job_results(run_dir) if r.timing and r.timing.window]

    first, second = windows(run_a), windows(run_b)
    clashes = [(w, v) for w in first for v in second if w[0] < v[1] and v[0] < w[1]]
    return {"windows": [len(first), len(second)], "overlapping_pairs": len(clashes), "examples": clashes[:3]}
