"""``runner.bench duty``: a run's measured time over its wall time, and where the rest went, in parts that add up to
it (the device phases, the turns, the compile beside the sweep, the time between turns, the slots' steps, the
sweep's start, the turns' own parts)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.analysis.between_turns import between_turns
from runner.analysis.records import job_results
from runner.analysis.slot_states import WARMUP_TASK, evaluation_states, slot_parts, warmup_states
from runner.analysis.turn_parts import (
    audits_taken_again,
    batches_rest_parts,
    gpu_between_batches,
    lead_seconds,
    short_batches,
    turn_parts,
    turns_sampled,
    wait_probes,
)
from runner.gpu.memory_admission import GIB
from runner.intervals import union_seconds
from runner.warmup_beside import warmup_windows
from runner.worker.device_token import EXCLUSIVE, ISOLATE_DEVICE, token_windows


def _while_warming_up(manifest: dict, results: list, warmups: list[dict], lanes: int) -> dict | None:
    """The sweep split at the end of its last warm-up (runner/warmup_beside.py): each part's wall time and what was
    measured in it (a turn counts where it began), and the duty of each. A cold torch_compile pass on the H200 ran at
    72.4% while its warm-ups ran and at 88.5% after (BENCHMARKS.md, forty-first session): the warm-up's cost, apart.
    None where no warm-up ran beside the sweep, or the run did not finish."""
    wall = float(manifest.get("wall_s") or 0.0)
    if not warmups or not wall or "finished" not in manifest:
        return None
    start = float(manifest["finished"]) - wall
    last = max(float(line["ended"]) for line in warmups)
    until = min(max(last - start, 0.0), wall)
    measured = [0.0, 0.0]
    for _, result in results:
        if result.timing:
            began = result.timing.window[0] if result.timing.window else start
            measured[began >= last] += result.timing.measured_s
    parts = {}
    for name, seconds, part in (("until_last_warmup", until, measured[0]), ("after", wall - until, measured[1])):
        parts[name] = {
            "wall_s": seconds,
            "measured_s": part,
            "duty_pct": 100 * part / (seconds * lanes) if seconds else None,
        }
    return parts


def duty(run_dir: Path) -> dict:
    """Measured time over wall time; and where the rest went: the device phases (the GPU's work token
    held by some evaluation, see ``runner/worker/device_token.py``), the measurements' exclusive turns
    and the compile warm-up; and the time between turns, hand-overs apart from cohorts (``between_turns``).

    With several GPUs (``hardware.gpus``) each has its own token, a lane: turns on different GPUs
    may overlap (that is the point), so the turns and phases are judged per lane, and the shares
    are of the lanes' wall time together (``wall_s`` times the number of lanes)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    results = job_results(run_dir)
    sampled = list(turns_sampled(run_dir, results))  # every samples file read once, for both turn figures
    measured = sum(r.timing.measured_s for _, r in results if r.timing)
    wall = float(manifest.get("wall_s") or 0.0)
    setup = float(manifest.get("setup_s") or 0.0)
    # Per lane, each result's task, windows and states apart (a warm-up's: whether its windows cut in).
    lane_results: dict[str, list] = {}
    for _, r in results:
        record = r.environment.get("device_token", {})
        if "path" in record:  # a worker that died before holding the token left no record: no lane of its own
            windows = token_windows(record)
            lane_results.setdefault(record["path"], []).append((r.task_id, windows, evaluation_states(r, windows)))
    warmups = warmup_windows(run_dir)
    for line in warmups:  # a warm-up beside the sweep: its windows are device phases of its lane
        record = line.get("token") or {}
        if "path" in record:
            entry = (f"{WARMUP_TASK}{line['eval_id']}", token_windows(record), warmup_states(line))
            lane_results.setdefault(record["path"], []).append(entry)
    lanes = {
        path: [window for _, windows, _ in per_result for window in windows]
        for path, per_result in lane_results.items()
    }
    in_flight = max((int(r.environment.get("lane", {}).get("in_flight") or 0) for _, r in results), default=0)
    # The run's lanes (a GPU given no evaluation still had its wall time), at least those seen.
    lane_count = max(int(manifest.get("lanes") or 1), len(lanes))
    lane_wall = wall * lane_count
    device_phases = sum(union_seconds([(start, end) for start, end, _ in w]) for w in lanes.values())
    # The evaluations' own windows, per lane, warm-ups' apart: the rest of the device phases is the seconds when only
    # a warm-up beside the sweep held the token (its compiled calls and autotuning: the compile's own device work).
    evaluation_phases = sum(
        union_seconds(
            [window[:2] for task, windows, _ in per_result if not task.startswith(WARMUP_TASK) for window in windows]
        )
        for per_result in lane_results.values()
    )
    turns = {lane: sorted((start, end) for start, end, mode in w if mode == EXCLUSIVE) for lane, w in lanes.items()}
    exclusive = sum(end - start for lane_turns in turns.values() for start, end in lane_turns)
    spans = sum(max(end for _, end, _ in w) - min(start for start, _, _ in w) for w in lanes.values() if w)
    # The turns' union (their sum where none overlap, as in every valid run): both parts below take
    # it, so the parts add up to the wall time even for a run whose turns clashed.
    turn_seconds = sum(union_seconds(lane_turns) for lane_turns in turns.values())
    warmup = float(manifest.get("warmup_s") or 0.0)
    isolation = sorted({r.environment.get("device_token", {}).get("isolation", ISOLATE_DEVICE) for _, r in results})
    return {
        "run": run_dir.name,
        "measurement_isolation": isolation,
        "lanes": lane_count,
        "evaluations": len(results),
        "wall_s": wall,
        "measured_s": measured,
        "duty_pct": 100 * measured / lane_wall if wall else None,
        # The command's own set-up before the sweep (from the process's start: imports, configuration, checks; MLflow's
        # parent run too, for a run from before MLflow opened beside the sweep), which ``wall_s`` leaves out, and the
        # duty with it counted.
        "setup_s": setup,
        # Where the set-up went (``runner/setup_clock.py``; None for a run from before they were kept).
        "setup_parts_s": manifest.get("setup_parts_s"),
        "duty_with_setup_pct": 100 * measured / ((wall + setup) * lane_count) if wall else None,
        "evaluations_per_min": 60 * len(results) / wall if wall else None,
        # The wall time during which some evaluation held a lane's token (shared phases overlap:
        # counted once per lane), summed over the lanes.
        "device_phases_s": device_phases,
        "exclusive_s": exclusive,
        # The share of the lanes' wall time during which some measurement had its turn.
        "measuring_pct": 100 * exclusive / lane_wall if wall else None,
        # Two measurements' turns on one GPU overlapping: never, under either isolation (evidence, not assumed).
        "overlapping_turns": sum(_overlapping(lane_turns) for lane_turns in turns.values()),
        "warmup_s": warmup,
        # The warm-up beside the sweep (runner/warmup_beside.py): its candidates, their span, what the sweep waited.
        "warmup_beside": manifest.get("warmup_beside"),
        # The duty until the last warm-up beside the sweep ended, and after it (None without such warm-ups).
        "while_warming_up": _while_warming_up(manifest, results, warmups, lane_count),
        # The share of the lanes' wall time during which their GPU was reserved for some device work
        # (the compile warm-up, before the evaluations, reserves every lane).
        "device_reserved_pct": 100 * (device_phases / lane_count + warmup) / wall if wall else None,
        "measured_of_device_phases_pct": 100 * measured / device_phases if device_phases else None,
        "measured_of_exclusive_pct": 100 * measured / exclusive if exclusive else None,
        # Where the lanes' wall time went, in parts that add up to it: measured; inside the turns but
        # not measured (L2 flushes, audit calls, clock reads; the warm-up before the sixteenth session, since
        # then in the shared phase while it queues); evaluations' shared phases with no turn beside them; a
        # warm-up beside the sweep's device windows with no evaluation's beside them (a cold torch_compile pass on
        # the H200: 31.7 s of its 683, where the warm pass had none: BENCHMARKS.md, fifty-sixth session);
        # the compile warm-up before the sweep (it reserves every lane); and no device work at all (start-up,
        # workers not ready, results written, the end).
        "wall_parts_s": {
            "measured": measured,
            "turn_not_measured": turn_seconds - measured,
            "shared_phases_only": evaluation_phases - turn_seconds,
            "compile_beside_only": device_phases - evaluation_phases,
            "compile_warmup": warmup * lane_count,
            "no_device_work": lane_wall - device_phases - warmup * lane_count,
        },
        # From each lane's first window to its last, summed: in a run made in one go, the lanes' wall
        # time minus this is its start and end, so the rest of ``no_device_work`` lies between windows.
        "first_to_last_window_s": spans,
        "between_turns": between_turns(lane_results.values(), in_flight or None),
        "slot_parts_s": slot_parts(results),
        "sweep_start_s": sweep_start(manifest, results),
        "turn_parts_s": turn_parts(sampled),
        "batches_rest_parts_s": batches_rest_parts(sampled),
        "leads_s": lead_seconds(sampled),
        "wait_probes_s": wait_probes(results),
        "gpu_between_batches": gpu_between_batches(sampled),
        "audits_taken_again": audits_taken_again(results),
        "short_batches": short_batches(sampled),
        "memory_released": memory_released(results),
    }


def memory_released(results) -> dict | None:
    """What the workers gave back to the driver with the token held, per stage (``runner/worker/memory_release.py``):
    evaluations, GiB given back, and the seconds they then held the token while the driver cleared it. None for a
    run from before the fifty-fourth session, or off a GPU."""
    stages: dict[str, dict] = {}
    for _, result in results:
        for line in result.environment.get("device_memory_released") or []:
            if "freed_bytes" not in line:
                continue
            stage = stages.setdefault(line["stage"], {"evaluations": 0, "freed_gib": 0.0, "settle_s": 0.0})
            stage["evaluations"] += 1
            stage["freed_gib"] += line["freed_bytes"] / GIB
            stage["settle_s"] += line["settle_s"]
    return stages or None


# The sweep's start, in the order its steps come (``sweep_start``): from the process's start, when each was first seen.
SWEEP_START_STEPS = (
    "fork_server_started",
    "fork_server_ready",
    "sweep_started",
    "first_slot_taken",
    "first_worker_started",
    "first_job_given",
    "first_job_started",
    "first_device_work",
    "first_measurement",
)


def sweep_start(manifest: dict, results) -> dict | None:
    """Where the start of the run's last invocation went, in seconds from its process's start (``from``; from its
    sweep's start where the process is older than the run: ``main`` given its arguments): its first fork server
    started and ready to fork (the local executor's), the sweep started (the set-up's end), the first slot taken, the
    first worker started, given its job and starting it, the first device work (a window of a lane's token) and the
    first measurement's turn. Of the evaluations whose slots that invocation took; a step is None where nothing
    recorded it (another executor, no evaluation dispatched). On the H200 machine the first measurement came 8.1 s
    after the process started, the fork server's imports the step it waited on (BENCHMARKS.md, forty-sixth session);
    None for runs from before this was kept (forty-seventh)."""
    last = manifest.get("last_invocation")
    if not last:
        return None
    sweep = float(last["sweep_started"])
    origin = last.get("process_started") or sweep
    first: dict[str, float] = {"sweep_started": sweep}

    def seen(step: str, when) -> None:
        if when is not None:
            first[step] = min(first.get(step, when), when)

    for _, result in results:
        taken = result.environment.get("lane", {}).get("slot", {}).get("taken")
        if taken is None or taken < sweep:  # never dispatched, or by an earlier invocation
            continue
        seen("first_slot_taken", taken)
        sandbox = result.environment.get("sandbox", {})
        seen("fork_server_started", sandbox.get("fork_server_started"))
        seen("fork_server_ready", sandbox.get("fork_server_ready"))
        seen("first_worker_started", sandbox.get("process_started"))
        seen("first_job_given", sandbox.get("job_given"))
        seen("first_job_started", result.started_at or None)
        for start, _, mode in token_windows(result.environment.get("device_token", {})):
            seen("first_device_work", start)
            if mode == EXCLUSIVE:
                seen("first_measurement", start)
    steps = {step: (first[step] - origin if step in first else None) for step in SWEEP_START_STEPS}
    return {"from": "process start" if last.get("process_started") else "sweep start", **steps}


def _overlapping(intervals: list[tuple[float, float]]) -> int:
    """How many of ``intervals`` (sorted by start) begin before an earlier one has ended."""
    count, reach = 0, float("-inf")
    for start, end in intervals:
        count += start < reach
        reach = max(reach, end)
    return count
