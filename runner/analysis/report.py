"""The markdown report of a run: headline metrics, verdicts, categories, environment."""

from __future__ import annotations

import math

import pandas as pd

from runner.analysis.metrics import FAST_P, per_category, summary, verdict_counts
from runner.analysis.records import AUTOTUNING_COLUMNS


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(cell) for cell in row) + " |" for row in rows]
    return lines


# The parts of the wall time that ``runner.analysis.duty.duty`` gives, as the report names them.
_WALL_PARTS = {
    "measured": "measured",
    "turn_not_measured": "inside the measurements' turns but not measured",
    "shared_phases_only": "shared device phases with no measurement beside them",
    "compile_beside_only": "the compile warm-up's device work beside the sweep, alone on the GPU",
    "compile_warmup": "compile warm-up",
    "no_device_work": "no device work",
}

# The set-up's parts (``runner/setup_clock.py``), as the report names them.
_SETUP_PARTS = {
    "interpreter": "Python's start and kbench's imports",
    "configuration": "the configuration",
    "suite": "the tasks resolved and planned",
    "executor_checks": "the executor's checks",
    "gpu_readings": "the GPU readings",
    "executor": "the executor's start",
    "run_dir": "the run directory",
    "run_dir_and_executor": "the run directory and the executor",  # runs from before the forty-seventh session
    "fingerprint": "the host's fingerprint",
    "source_diff": "the checkout's difference from its commit",
    # Runs from before the fifty-first session; since, MLflow opens beside the sweep (``tracking_beside_s``).
    "mlflow_import": "MLflow's import",
    "mlflow_store": "MLflow's store",
    "mlflow_parent_run": "MLflow's parent run",
    "orchestrator": "the orchestrator",
}


def _largest_setup_part(parts: dict[str, float] | None) -> str:
    """`` (the largest part: MLflow's import 3.0 s)``; nothing for a run from before the parts were kept."""
    if not parts:
        return ""
    name, seconds = max(parts.items(), key=lambda item: item[1])
    return f" (the largest part: {_SETUP_PARTS.get(name, name)} {seconds:.1f} s; all in `setup_parts_s`)"


# The parts of the evaluations' slots' time (``runner.analysis.slot_states.slot_parts``), as the report names them.
_SLOT_PARTS = {
    "worker": "in the worker",
    "memory_admission": "waiting for device memory",
    "health_gate": "at the health gate",
    "worker_start": "starting the worker",
    "worker_end": "ending the worker",
    "first_try": "first tries run again",
    "prepare": "preparing jobs",
    "collect": "collecting",
    "read_gpu_after": "reading the GPU after",
}

# The sweep's start (``runner.analysis.duty.sweep_start``): the steps the report names, after the first measurement's.
_SWEEP_START_STEPS = {
    "fork_server_ready": "the fork server ready",
    "sweep_started": "the set-up done",
    "first_job_given": "the first job given to a worker",
}


def _sweep_start_line(start: dict) -> str:
    """``the first measurement 8.1 s after the process started (the fork server ready at 5.5 s, ...)``."""
    origin = "the process" if start.get("from") == "process start" else "the sweep"
    steps = [
        f"{label} at {start[step]:.1f} s" for step, label in _SWEEP_START_STEPS.items() if start.get(step) is not None
    ]
    return (
        f"the first measurement {start['first_measurement']:.1f} s after {origin} started"
        + (f" ({', '.join(steps)})" if steps else "")
        + "; every step in `sweep_start_s`"
    )


def _warmup_beside_line(beside: dict) -> str:
    """What the compile warm-up beside the sweep cost the run (its manifest's ``warmup_beside``): the device time its
    windows held the token, shared, between the turns (timing autotuning configs the largest part as a rule), and the
    evaluations that waited for their candidates' warm-ups."""
    failed = f", {beside['failed']} failed (their evaluations compiled for themselves)" if beside.get("failed") else ""
    union = beside.get("windows_union_s")  # a run from before the fifty-third session has none
    of_the_pass = f", {union:.1f} s of the pass (several open at once)" if union is not None else ""
    return (
        f"{beside['candidates']} candidates over {beside.get('span_s', 0.0):.1f} s{failed}; their device windows "
        f"{beside.get('windows_s', 0.0):.1f} s summed{of_the_pass}, in which {beside.get('autotune_benchmark_s', 0.0):.1f}"
        f" s timed {beside.get('kernels_autotuned', 0)} kernels' autotuning configs; "
        f"{beside.get('evaluations_held_back', 0)} "
        f"evaluations waited for theirs, {beside.get('held_back_s', 0.0):.1f} s together (`warmup.jsonl`; the duty "
        "until the last of them ended and after: `python -m runner.bench duty RUN_DIR`)"
    )


def _source_diff_note(record) -> str:
    """The report's word on a checkout that differed from its commit (``runner/tracking/source_diff.py``)."""
    if not isinstance(record, dict):
        return ""
    return (
        f" with the checkout's changes in `{record['file']}` ({record['files']} files, sha256 {record['sha256'][:12]})"
    )


def render_report(frame: pd.DataFrame, manifest: dict) -> str:
    lines = [f"# kbench report — {manifest.get('name', 'run')}", ""]
    env = manifest.get("environment", {})
    executor_env = env.get("executor", {})
    lines += [
        f"- run: `{manifest.get('run_dir', '')}`  MLflow parent run: `{manifest.get('mlflow_run_id') or '–'}`",
        f"- suite: {manifest.get('suite', '–')} ({manifest.get('planned', len(frame))} evaluations planned, "
        f"{len(frame)} finished)  hardware: {manifest.get('hardware', '–')}",
        f"- environment: {executor_env.get('note') or executor_env.get('image') or executor_env.get('kind', '–')}; "
        f"kbench {env.get('host', {}).get('kbench_version', '–')} @ {env.get('host', {}).get('git_commit', '–')}"
        f"{_source_diff_note(env.get('host', {}).get('source_diff'))}",
        f"- device: {_device_line(env)}",
    ]
    if manifest.get("wall_s"):
        measured = float(frame["measured_s"].fillna(0).sum()) if not frame.empty else 0.0
        lanes = int(manifest.get("lanes") or 1)  # several GPUs measure at once: a share of their wall time together
        of_what = f"of the {lanes} GPUs' wall time together" if lanes > 1 else "of the wall time"
        lines.append(
            f"- wall time {manifest['wall_s']:.1f} s; measured time (timed regions, both sides) "
            f"{measured:.1f} s = {100 * measured / (lanes * manifest['wall_s']):.1f}% {of_what}"
            + (f"; compile warm-up {manifest['warmup_s']:.1f} s" if manifest.get("warmup_s") else "")
            + (f"; set-up before it {manifest['setup_s']:.1f} s" if manifest.get("setup_s") else "")
            + _largest_setup_part(manifest.get("setup_parts_s"))
        )
        parts = manifest.get("wall_parts_s")
        if parts:  # added up, they make the wall time (per lane, summed over the lanes)
            whose = f"the {lanes} GPUs'" if lanes > 1 else "the"
            lines.append(
                f"- where {whose} wall time went: "
                + ", ".join(
                    f"{_WALL_PARTS.get(part, part)} {seconds:.1f} s"
                    for part, seconds in parts.items()
                    # a run that compiled nothing, or nothing beside the sweep, has no warm-up to name
                    if seconds or part not in ("compile_warmup", "compile_beside_only")
                )
                + " (`python -m runner.bench duty RUN_DIR`)"
            )
        slots = manifest.get("slot_parts_s")
        if slots:  # summed over the evaluations (runs from before the fifteenth session have none)
            lines.append(
                "- where the evaluations' slots spent their time: "
                + ", ".join(
                    f"{label} {slots[part]:.1f} s"
                    for part, label in _SLOT_PARTS.items()
                    if round(slots.get(part) or 0.0, 1)  # what would read "0.0 s" is not named
                )
            )
        start = manifest.get("sweep_start_s")
        if start and start.get("first_measurement") is not None:
            lines.append(f"- the sweep's start: {_sweep_start_line(start)}")
        beside = manifest.get("warmup_beside")
        if beside and beside.get("candidates"):
            lines.append(f"- the compile warm-up beside the sweep: {_warmup_beside_line(beside)}")
    lines.append("")
    if frame.empty:
        return "\n".join(lines + ["No finished evaluations.", ""])
    methods = sorted(frame["method"].unique())
    header = (
        ["method", "evaluations", "correct"] + [f"fast_{p:g}" for p in FAST_P] + ["geomean speedup", "median speedup"]
    )
    rows = []
    for method in methods:
        s = summary(frame[frame["method"] == method])
        rows.append(
            [method, s["evaluations"], s["correct"]]
            + [s[f"fast_{p:g}"] for p in FAST_P]
            + [s["geomean_speedup"], s["median_speedup"]]
        )
    lines += ["## Summary", ""] + _table(header, rows) + [""]
    lines += ["## Verdicts", ""]
    verdict_rows = [
        [method] + [f"{k}: {v}" for k, v in verdict_counts(frame[frame["method"] == method]).items()]
        for method in methods
    ]
    width = max(len(r) for r in verdict_rows)
    lines += _table(["method"] + ["verdict"] * (width - 1), [r + [""] * (width - len(r)) for r in verdict_rows]) + [""]
    for method in methods:
        table = per_category(frame[frame["method"] == method])
        lines += [f"## Per category — {method}", ""]
        lines += _table(list(table.columns), table.values.tolist()) + [""]
    lines += _placement_section(frame)
    lines += _recheck_section(frame)
    lines += _autotuning_section(frame)
    failures = frame[frame["verdict"] != "correct"]
    if not failures.empty:
        lines += ["## Not correct", ""]
        lines += _table(
            ["method", "task", "verdict", "reason"],
            failures[["method", "task_id", "verdict", "reason"]].values.tolist(),
        ) + [""]
    return "\n".join(lines)


_PLACEMENT_ROWS = 10  # evaluations listed where the placements moved the speedup more than the sampling noise


def _placement_section(frame: pd.DataFrame) -> list[str]:
    """The evaluations whose speedup depends on where their inputs, outputs and weights lie in memory more than on
    sampling: the placements' standard error over the ratio noise (runner/worker/timing.py). No section
    where none does, or where the timing sampled one placement."""
    noise = pd.to_numeric(frame["placement_noise"], errors="coerce")
    moved = frame[noise.notna() & (noise > pd.to_numeric(frame["ratio_noise"], errors="coerce"))]
    if moved.empty:
        return []
    moved = moved.assign(placement_noise=noise[moved.index]).sort_values("placement_noise", ascending=False)
    rows = [
        [
            row.method,
            row.task_id,
            _fmt(row.speedup, 4),
            f"{100 * row.ratio_noise:.3f}%",
            f"{100 * row.placement_noise:.3f}%",
        ]
        for row in moved.head(_PLACEMENT_ROWS).itertuples()
    ]
    lines = ["## Where memory placement moves the speedup", ""]
    lines += [
        f"{len(moved)} evaluations: the speedups of their placements (input sets, outputs and copies of the "
        "weights at other addresses, sampled in turn) lie further apart than the samples' noise allows; more samples do not narrow that, "
        "more placements do (`eval.timing.placements`). The largest:",
        "",
    ]
    header = ["method", "task", "speedup", "ratio noise", "placement noise"]
    return lines + _table(header, rows) + [""]


def _recheck_section(frame: pd.DataFrame) -> list[str]:
    """The evaluations whose measurement's sync audits would have flagged work left on another stream, so that
    fresh audits were taken (runner/worker/timing.py): a side's few audits of one shape topped up and judged with
    them, or five fresh ones per side judged instead; a disturbed GPU, or a candidate confirmed as hiding work (its
    verdict says which). No section where none was."""
    topped = _flagged(frame, "audits_topped_up")
    rechecked = _flagged(frame, "audits_rechecked")
    either = frame[topped | rechecked]
    if either.empty:
        return []
    lines = ["## Audits taken twice", ""]
    lines += [
        f"{len(either)} evaluations: their measurement's audits (calls closed by a device-wide synchronisation) "
        "ran longer than their events by more than unjoined stream work allows. Where a side had fewer than three "
        f"audits of one kind, fresh ones topped them up and were judged with them ({int(topped.sum())}); where the "
        f"audits still showed the work, five fresh ones per side were taken and judged instead ({int(rechecked.sum())}"
        "). The first ones are in each result (`timing.audit_top_up`, `timing.audit_recheck`).",
        "",
    ]
    rows = [
        [method, task, "recheck" if again else "top-up", verdict, reason]
        for method, task, again, verdict, reason in zip(
            either["method"], either["task_id"], rechecked[either.index], either["verdict"], either["reason"]
        )
    ]
    return lines + _table(["method", "task", "audits", "verdict", "reason"], rows) + [""]


def _flagged(frame: pd.DataFrame, column: str) -> pd.Series:
    """Per evaluation, whether ``column`` is True (False where it is None or NaN: no timing, an older record, or a
    column the records did not have yet)."""
    if column not in frame:
        return pd.Series(False, index=frame.index)
    return frame[column].eq(True)


def _autotuning_section(frame: pd.DataFrame) -> list[str]:
    """Per method, the candidates' kernels with a choice of configs and how they got it (``result.autotuning``). No
    section where no evaluation recorded any."""
    counts = frame[list(AUTOTUNING_COLUMNS)].apply(pd.to_numeric, errors="coerce")
    with_kernels = counts.fillna(0).sum(axis=1) > 0
    if not with_kernels.any():
        return []
    rows = []
    for method in sorted(frame.loc[with_kernels, "method"].unique()):
        mine = counts[(frame["method"] == method) & with_kernels]
        rows.append([method, len(mine), *(int(mine[column].sum()) for column in counts.columns)])
    lines = ["## Autotuned kernels", ""]
    lines += [
        "The configs each evaluation's kernels ran are in its result (`autotuning`). Inductor's were read from the "
        "compile cache (chosen by an earlier process, the compile warm-up as a rule) or autotuned during the "
        "evaluation: those the cache had no choice for, and those Inductor gave more configs after its cache lookup "
        "(`uncached`: a reduction's block halved for occupancy), which every process times again. A fresh compile "
        "may choose others, and move the speedup with them (BENCHMARKS.md, forty-first and forty-second sessions). "
        "`runner.bench repeat` says whether two runs ran them alike.",
        "",
    ]
    header = ["method", "evaluations", "Inductor's, from the cache", "Inductor's, autotuned here", "@triton.autotune"]
    return lines + _table(header, rows) + [""]


def _device_line(env: dict) -> str:
    gpu = env.get("gpu") or {}
    if not gpu.get("available"):
        return f"CPU ({env.get('host', {}).get('platform', '')}); NVML: {gpu.get('why', 'not available')}"
    clocks = gpu.get("sm_clock_app_mhz"), gpu.get("sm_clock_max_mhz")
    locked = "application clocks" if clocks[0] == clocks[1] else "clocks not locked"
    return (
        f"{gpu.get('name')} ({gpu.get('uuid')}), driver {gpu.get('driver')}, SM clock {gpu.get('sm_clock_mhz')} MHz "
        f"(max {gpu.get('sm_clock_max_mhz')}), {locked}"
    )
