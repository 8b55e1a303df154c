"""A compile warm-up job inside the sandbox: the candidate run once per checked shape, so its compiled kernels
(Inductor's, Triton's) are on disk when its evaluation runs from scratch in a fresh process. Nothing is judged.

Ahead of the sweep (``warmup_beside`` false) the orchestrator holds the device's token exclusive around the whole
warm-up and the job takes none. Beside the sweep (``runner/warmup_beside.py``) the job holds the token shared for
its device work (weights, inputs, the compiled kernels' first runs and Triton's autotuning, which run after the
compile) in windows that cut in (``DeviceToken(cuts_in=True)``: each waits for the measurement in its turn, not for
the queue of ready ones; where the job says ``"warmup_cut_in": "told"``, only once the orchestrator has written
``CUT_IN_FILE`` into its ``out/``, and before that at the ready gate as an evaluation's first phase). It lets go of
the token from the start of each Dynamo compilation (tracing, Inductor, Triton's compiler: host work) to its end,
when it asks for it again; before it lets go, it waits for the device work it queued (weights, inputs, the last
shape's kernels: CUDA runs them after the host has moved on), so none of it runs into a measurement's turn. The
process runs at the lowest CPU priority (``BESIDE_NICE``). It writes its token windows and compile windows to
``WARMUP_RECORD_FILE``, with the configs its kernels chose and how long timing them took (``autotuning.py``), what it
paid before its job as any spare (``prewarm.spare_record``: its CUDA context's window, made off the token beside the
measurements) and when it finished (``finished_at``: its context is reset and the process exits right after), so
``runner.bench disturbed`` can hold the sweep's slowed batches against the warm-ups' device events too. Before it
lets go of the token for the last time it may give its cached device memory back and wait for the driver to clear it
(``executor.release_under_token``, ``memory_release.py``; ``device_memory_released`` in its record), so that its
exit frees little inside a measurement.
Where Dynamo has no compile callbacks the token stays held throughout (correct, slower).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

from runner.worker.autotuning import read_autotuning
from runner.worker.device_token import SHARED, TOKEN_ENV, DeviceToken
from runner.worker.loading import build_model, import_file, make_inputs
from runner.worker.memory_release import release_device_memory, settles
from runner.worker.prewarm import spare_record
from runner.worker.protocol import (
    CANDIDATE_FILE,
    CANDIDATE_MODULE,
    CUT_IN_FILE,
    OUT_DIR,
    TASK_FILE,
    WARMUP_RECORD_FILE,
    write_json_atomic,
)

# os.nice's increment for a warm-up beside the sweep: the most Linux allows (19), so the measurements' processes
# and the other evaluations get a core first.
BESIDE_NICE = 19


def warm_up(job: dict, job_dir: Path, trial_seed) -> int:
    """Run the candidate once per checked shape (``trial_seed(seed, 0)``'s inputs, as the first trial's)."""
    device = torch.device(job["device"])
    task = job["task"]
    seed = int(job["seed"])
    beside = bool(job.get("warmup_beside"))
    if beside:
        os.nice(BESIDE_NICE)
    token_record: dict = {}
    compiles: list[list[float]] = []
    reference_module = import_file(job_dir / TASK_FILE, "kbench_task")
    candidate_module = import_file(job_dir / CANDIDATE_FILE, CANDIDATE_MODULE)
    told = job_dir / OUT_DIR / CUT_IN_FILE
    cuts_in = told.exists if job.get("warmup_cut_in", "always") == "told" else True
    settle = device_settled(device)
    released = None
    try:
        with (
            DeviceToken(os.environ.get(TOKEN_ENV) if beside else None, token_record, cuts_in=cuts_in) as token,
            compiling_off_the_token(token, compiles, settle),
            torch.no_grad(),
        ):
            token.hold(SHARED)
            model = None
            for shape_name in job["check_shapes"]:
                dims = task["shapes"][shape_name]
                model = build_model(candidate_module.ModelNew, reference_module, dims, device, seed)
                model(*make_inputs(reference_module, dims, device, trial_seed(seed, 0)))
            settle()  # the last shape's kernels have run before the token is let go
            del model
            if settles(job):  # cleared before a measurement, not by the exit inside one
                released = release_device_memory(device, "end")
    finally:
        if beside:
            record = {
                "token": token_record,
                "compiles": compiles,
                "autotuning": read_autotuning(candidate_module),
                **spare_record(),
                "device_memory_released": released,
                "finished_at": time.time(),
            }
            write_json_atomic(job_dir / OUT_DIR / WARMUP_RECORD_FILE, record)
    return 0


def _compile_callbacks():
    """Dynamo's compile callback handler, or None where this torch has none."""
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return None
    if not hasattr(callback_handler, "register_start_callback"):
        return None
    return callback_handler


def device_settled(device: torch.device) -> Callable[[], None]:
    """What waits until the work this process queued on ``device`` has run (nothing to wait for off a GPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


@contextmanager
def compiling_off_the_token(token: DeviceToken, compiles: list[list[float]], settle: Callable[[], None]):
    """For the block, each outermost Dynamo compilation lets go of ``token`` at its start, once ``settle`` has
    returned (the device work queued so far has run: ``device_settled``), and holds it shared again at its end;
    ``compiles`` gets each one's [start, end] (epoch seconds)."""
    handler = _compile_callbacks()
    if handler is None:
        yield
        return

    def started(*_):
        settle()
        token.release()
        compiles.append([time.time(), None])

    def ended(*_):
        if compiles and compiles[-1][1] is None:
            compiles[-1][1] = time.time()
        token.hold(SHARED)

    handler.register_start_callback(started)
    handler.register_end_callback(ended)
    try:
        yield
    finally:
        handler.remove_start_callback(started)
        handler.remove_end_callback(ended)
