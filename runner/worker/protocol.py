"""The job-directory protocol between orchestrator and worker, and the result record.

A job directory holds ``job.json``, ``task.py`` and ``candidate.py`` (read-only to the
worker) and an ``out/`` folder where the worker writes ``result.json``, ``samples.json``
and a ``stage`` marker. Both sides check ``PROTOCOL_VERSION`` and refuse each other when
it differs. The result record is typed and versioned (``RESULT_SCHEMA``); everything
MLflow and the reports show is derived from it.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

# 2: the job's timing holds ``batch_min_ms``, which a worker of protocol 1 refuses (its image: rebuild it).
# 3: a measurement keeps its audited calls as samples (``Timing.audit_samples``, ``samples.json``'s
# ``audit_samples``), which a worker of protocol 2 does not: its image measures otherwise (rebuild it).
# 4: the job's timing holds ``max_placements`` (placements made during the turn), which a worker of protocol 3 fails
# on at its timing, every evaluation a runtime error (rebuild its image).
# 5: a warm-up job may say ``warmup_beside``: hold the device's token shared for its device work, as the sweep's
# evaluations do. A worker of protocol 4 ignores it and would run device work beside measurements.
PROTOCOL_VERSION = 5
RESULT_SCHEMA = "kbench.result/1"

# The two sides of every timed pair, in the order results and samples list them.
SIDES = ("reference", "candidate")

VERDICTS = (
    "correct",
    "incorrect",
    "compile_error",
    "runtime_error",
    "timeout",
    "integrity_violation",
    "infra_error",
)

JOB_FILE = "job.json"
TASK_FILE = "task.py"
CANDIDATE_FILE = "candidate.py"
# The module name the worker imports the candidate's file under (it stays in sys.modules: runner/worker/autotuning.py).
CANDIDATE_MODULE = "kbench_candidate"
OUT_DIR = "out"
RESULT_FILE = "result.json"
SAMPLES_FILE = "samples.json"
# A warm-up beside the sweep: its token windows and compile windows (runner/worker/warmup.py).
WARMUP_RECORD_FILE = "warmup.json"
# A warm-up beside the sweep whose job says ``"warmup_cut_in": "told"``: the orchestrator writes this file into its
# ``out/`` once the sweep needs it soon, and from then on its windows cut in (runner/warmup_beside.py). A worker
# from before the field cuts in always.
CUT_IN_FILE = "cut_in"
STAGE_FILE = "stage"
# Written by the worker as it takes its job, before any device work (the stage marker waits for the device's
# token): the orchestrator's memory admission counts the evaluation's promise from it (runner/gpu/memory_admission.py).
TAKEN_FILE = "taken"
# The environment variable naming the output checks' own Triton cache (runner/worker/fused_checks.py).
CHECKS_CACHE_ENV = "KBENCH_CHECKS_CACHE"
# The environment variable naming the file a spare writes what it did before its job to, once done
# (``prewarm.write_spare_record``): the executor keeps it for the run where the spare is dismissed without a job.
SPARE_RECORD_ENV = "KBENCH_SPARE_RECORD"
SPARE_RECORD_FILE = "spare.json"


class ProtocolError(RuntimeError):
    """The job and the worker disagree on the protocol version or the job is malformed."""


@dataclass
class TimingSettings:
    """How the worker samples; the config's ``eval.timing`` extends it with an on/off switch."""

    min_samples: int = 100
    max_samples: int = 5000
    target_noise: float = 0.005
    # nvbench's --min-time: the noise target may stop sampling only once each side's samples add up to this
    min_time_s: float = 0.0
    time_cap_s: float = 10.0
    batch: int = 20
    # A batch's least GPU time: where the warm-up's calls say ``batch`` pairs take less, a batch holds ``batch``
    # times the least power of two pairs that take this long, so the host's work per batch (launching it, the
    # clock reading: 2-5 ms on the H100, up to 46; the judgement) runs while the GPU still has the batch queued
    # (BENCHMARKS.md, twenty-ninth session); at most 64 times ``batch``, and ``max_samples`` / 20 pairs
    # (runner/worker/timing.py). 0: ``batch`` pairs, whatever they take.
    batch_min_ms: float = 0.0
    # The warm-up before the samples: one call of each side (three where that pair is short,
    # samplers.LONG_ROUND_MS), then both sides in turn until this much time (the two sides together) has run;
    # none of it is kept (samplers.warm_up).
    warmup_ms: float = 25.0
    cold: bool = True  # flush L2 before every sample; False: "hot", the cache keeps what the last call left
    # What a flush writes, in L2 sizes (the H100's L2: 50 MiB). Two evict whatever the last call left;
    # nvbench writes one. What one size evicts on a given GPU is measured, not assumed (BENCHMARKS.md).
    flush_l2_multiple: float = 2.0
    # "events": events queued per batch, one wait per batch (for its last end event, the next batch queued behind
    # it already, where it has no audit call); batches also take an audit
    # sample of one side closed by a device-wide synchronisation, which exposes work left on other
    # streams (the audited call itself, between its own events, is a sample like the batch's where the batch
    # still ran as it was launched: timing.py). "device": every sample is closed by a device-wide
    # synchronisation.
    sync: str = "events"
    # With "events": batches audit until each side has three audits (sync_audits.MIN_AUDITS), then each later
    # batch one side with this chance (drawn from the seed). Every audit is one more call in the turn, kept as a
    # sample (its synchronisation and the host's round trip are not): it was 2.5% of a long kernel's measured
    # time, unmeasured, when every batch audited (BENCHMARKS.md, fourteenth session). 1: every batch.
    audit_share: float = 0.25
    graphs: bool = False  # replay each side as a captured CUDA graph (no launch overhead); GPU only
    # On a GPU: a sample that finds less work queued ahead of it than its side takes the host to queue (the call before
    # it waited for the device, or was quicker to queue) starts behind a GPU sleep that makes up the difference, so the
    # host's pace stays out of it (queue_lead.QueueLead).
    lead_dry_queue: bool = True
    input_sets: int = 3  # timed calls rotate among this many input sets (caching by pointer fails)
    # The timed call at this many placements: input sets, outputs and weights at other addresses each, batches
    # taking them in turn (runner/worker/timing.py); 1: one placement, as one process sees it.
    placements: int = 4
    # Where the placements' speedups differ beyond their batches' own noise, and the error that leaves on their mean
    # is over ``target_noise``, the measurement makes more during its turn (doubling) up to this many
    # (placements.PlacementMaker, timing.py); at or under ``placements``: none made.
    max_placements: int = 16
    # The timed inputs' seed. None: drawn by each evaluation after the candidate's import, so nothing
    # it computed beforehand can hold their answers (recorded as timing.input_seed). A number makes them
    # the same in every evaluation, to redo one exactly: a candidate that reads its job can predict them.
    input_seed: int | None = None
    max_throttled_batches: int = 20  # batches thrown away (heat, hardware slowdown) before giving up
    # After a throttled batch the GPU idles (the measurement keeps its turn) until NVML shows no
    # thermal or hardware slowdown, for at most this long, before the batch is taken again.
    cooldown_s: float = 2.0
    discard_power_capped: bool = False  # also throw away batches run at the software power cap


@dataclass
class Verdict:
    """What happened to the candidate. ``reason`` and ``message`` explain every non-correct status."""

    status: str
    reason: str = ""
    message: str = ""
    stage: str = ""

    def __post_init__(self) -> None:
        if self.status not in VERDICTS:
            raise ValueError(f"unknown verdict {self.status!r}")


@dataclass
class TimingSummary:
    """One side's samples summarised; raw samples live in ``samples.json``."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    mean_ms: float
    samples: int
    relative_noise: float


@dataclass
class Timing:
    clock: str  # "cuda_events" or "host_perf_counter"
    shape: str
    cache: str  # "cold" (L2 flushed before every sample) or "hot"
    reference: TimingSummary
    candidate: TimingSummary
    speedup: float
    ratio_noise: float
    measured_s: float  # sum of the timed regions of both sides (the audited calls kept as samples included)
    wall_s: float  # wall time of the timing loop, from its turn (the warm-up runs before it) to its end
    stop_reason: str
    sync: str = "events"
    graphs: str = "off"  # "off", "on", or why capture failed (both sides then ran eagerly)
    input_sets: int = 1
    input_seed: int | None = None  # the seed of the timed input sets (TimingSettings.input_seed)
    clocks_watched: str = "not available"  # "nvml", or why the clocks were not watched
    flush_bytes: int | None = None  # what the L2 flush wrote before every sample (cold on a GPU), else None
    # From the warm-up's end to the turn (the shared work still in); longer than the warm-up: one more round.
    turn_wait_s: float = 0.0
    sm_clock_mhz: float | None = None  # median SM clock over the kept batches
    throttled_batches: int = 0  # batches discarded because the GPU was slowed by heat or hardware
    cooled_s: float = 0.0  # idle seconds after throttled batches, waiting for the slowdown to clear
    power_capped_batches: int = 0  # kept batches during which the GPU ran at its software power cap
    # Per side: synchronised audit minus event median (judged), the larger of its audits after a synchronisation and
    # behind a chain of batches (sync_audits.sync_gaps).
    sync_gap_ms: dict = field(default_factory=dict)
    # Where the measurement's audits flagged unjoined work with a side's audits of one shape fewer than MIN_AUDITS,
    # fresh ones brought those shapes up to it and were judged with the measured ones (runner/worker/sync_audits.py):
    # {"why": the measured audits' evidence, "first_gap_ms": their gaps, "audits": the fresh ones per side, "chain":
    # the batches queued ahead of those behind a chain, "seconds": their time in the turn}; else None.
    audit_top_up: dict | None = None
    # Where the audits (topped up, if they were) still flagged it, a fresh set was judged instead (sync_audits.py):
    # {"why": the first set's evidence, "first_gap_ms": its gaps, "audits_per_side": the recheck's, "seconds": its
    # time in the turn}; else None.
    audit_recheck: dict | None = None
    window: list = field(default_factory=list)  # [start, end] of the timing loop, epoch seconds (lock audits)
    placements: int = 1  # input sets, outputs (and weight copies) at this many sets of addresses, sampled in turn
    weight_copies: int = 1  # each side's weights at this many addresses, one copy per placement (placements.py)
    placement_spread: float | None = None  # the placements' speedups: largest over smallest, minus 1
    placement_noise: float | None = None  # standard error of their mean, relative to it
    placements_added: int = 0  # of ``placements``, those made during the turn (``TimingSettings.max_placements``)
    batch_pairs: int | None = None  # pairs per batch (TimingSettings.batch, more where ``batch_min_ms`` asks)
    # What sized them, ms a pair of calls: the warm-up's shortest round and, where one ran, the round in the turn
    # (``{"warm_up": .., "in_turn": ..}``; the shorter of the two counts).
    sizing_rounds_ms: dict | None = None
    # Audited calls kept as samples, both sides (each side's ``samples`` counts its own): an audit's call between its
    # own events, where the batch it closed still ran as it was launched (runner/worker/timing.py).
    audit_samples: int = 0
    # Per side, the samples that started behind a lead (the GPU's queue held less than their host time), and each side's
    # lead at the end, ms (``queue_lead.QueueLead``); None where the sampler does not lead (the host clock, or
    # ``TimingSettings.lead_dry_queue`` off).
    led_samples: dict | None = None
    lead_ms: dict | None = None
    # Per side probed, whether its calls wait for the device inside (``samplers.CudaSampler._probe_waits``): such a
    # side is led only by the work its call leaves running after it returns (``QueueLead.left_running``: one that waits
    # partway; its lead above is 0 where it waits at its end). A side not probed (its host well ahead of its GPU work)
    # is absent.
    waits_for_device: dict | None = None
    # The seconds those probes took, both sides: ``{"before_turn": .., "in_turn": ..}`` (the warm-up's, beside the shared
    # work, and the measurement's own, in its turn with nothing measured), the batches still queued ahead of a probe
    # waited for first and left out (before the sixty-seventh session they were in); None where the sampler does not
    # lead.
    wait_probes_s: dict | None = None
    # Per side probed, what its probe went on: its host history's median (ms), then the host and GPU times of the one
    # call it timed on an empty queue (ms; that call's host time sized the sleeps), and its tries (0 where that call
    # settled it: its host well ahead of its GPU work). Before the sixty-eighth session the one call was timed only
    # where the history held fewer than three calls (``gpu_ms`` None otherwise, and ``history_host_ms`` absent).
    wait_probe_calls: dict | None = None
    # Where a side waits for the device inside its calls and ``executor.quiet_waiting_turns`` is on, the device's
    # context lock held from that batch on, so no other worker made its CUDA context meanwhile
    # (``runner/worker/quiet_turn.py``): ``asked_at``, ``waited_s``, ``window`` ([start, end], held) or ``not taken``
    # (why). None where it was not asked (no side waits, the setting off, a CPU).
    quiet_turn: dict | None = None


@dataclass
class Trial:
    shape: str
    trial: int
    seed: int
    ok: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    reason: str = ""


@dataclass
class Result:
    eval_id: str
    task_id: str
    task_hash: str
    candidate_hash: str
    verdict: Verdict
    trials: list[Trial] = field(default_factory=list)
    timing: Timing | None = None
    environment: dict = field(default_factory=dict)
    integrity: dict = field(default_factory=dict)  # the static policy used, its findings, the runtime checks run
    roofline: dict = field(default_factory=dict)  # floor, bound, achieved TB/s, TFLOP/s, % of the roofline per side
    autotuning: dict = field(default_factory=dict)  # the configs the candidate's autotuned kernels ran (autotuning.py)
    stage_seconds: dict = field(default_factory=dict)
    started_at: float = 0.0
    finished_at: float = 0.0
    schema: str = RESULT_SCHEMA
    protocol: int = PROTOCOL_VERSION

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        if data.get("schema") != RESULT_SCHEMA:
            raise ProtocolError(f"result schema {data.get('schema')!r}, expected {RESULT_SCHEMA!r}")
        data = dict(data)
        data["verdict"] = Verdict(**data["verdict"])
        data["trials"] = [Trial(**t) for t in data.get("trials", [])]
        timing = data.get("timing")
        if timing:
            timing = dict(timing)
            timing["reference"] = TimingSummary(**timing["reference"])
            timing["candidate"] = TimingSummary(**timing["candidate"])
            data["timing"] = Timing(**timing)
        return cls(**data)


def batch_medians(values: list[float], batch: int, count: int) -> list[float]:
    """The medians of one side's first ``count`` batches of ``batch`` samples each: the samples file keeps each
    side's samples in batch order (read here by the timing engine and by ``runner/analysis``, without torch)."""
    return [statistics.median(values[k * batch : (k + 1) * batch]) for k in range(count)]


def write_json_atomic(path: Path, data) -> None:
    """Write JSON to a temporary name in the same folder, fsync, then rename over ``path``."""
    write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True, default=str))


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary name in the same folder, fsync, then rename over ``path``: a reader
    sees the old file or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_job(job_dir: Path) -> dict:
    path = job_dir / JOB_FILE
    try:
        job = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"cannot read {path}: {exc}") from None
    if job.get("protocol") != PROTOCOL_VERSION:
        raise ProtocolError(
            f"job protocol {job.get('protocol')!r} but this worker speaks {PROTOCOL_VERSION}: "
            "orchestrator and worker come from different kbench versions"
        )
    return job


def read_stage(marker: Path) -> str:
    """The stage a worker last marked in ``marker`` (``out/stage``); "" before it marked any."""
    try:
        return marker.read_text().strip()
    except OSError:  # not written yet (or gone with its sandbox)
        return ""
