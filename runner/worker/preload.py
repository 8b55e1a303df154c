"""The reference's kernels, and kbench's own compiled candidate's, loaded into the worker's CUDA context before its
first shared phase, none of them run.

CUDA loads a kernel's code into a process's context at the kernel's first use (lazy loading, torch's default):
about 20 ms for each first elementwise kernel and 0.1 s for a first linear layer (cuBLAS) on the H100, host and
driver work that barely contends with other processes (BENCHMARKS.md, nineteenth and twenty-sixth sessions).
Inside an evaluation's first shared phase that is time every other member of its cohort waits for: a cohort's
gap between two measurements lasts as long as its slowest member (twenty-second session).

A worker that has its job waits at the ready gate (``device_token.py``) until the measurements queued before
it are done. Meanwhile ``preload_reference_kernels`` captures the reference's construction, inputs and forward
at every checked shape, and the float64 layer's calls (``precision.float64_calls``), into a CUDA graph that
is thrown away without being launched: capturing a launch makes CUDA load the kernel and runs nothing of it
on the GPU, so it needs no device token (as ``fused_checks.load_into_context`` for the check kernels). What
does run: each capture's start fills two one-element tensors, torch's bookkeeping of the random generator
under a graph (seen by the CUDA profiler on the H100), tiny beside what a spare's CUDA context does off the
token. The task's own file is run, never a candidate the worker did not check; no value comes out of the
capture, and the reference stage that follows computes everything again from its seeds. On the H100, six suite
tasks alone: that stage 0.147 s (median) without, 0.012 s after a 0.123 s preload, every input and output
identical. On by
``executor.preload_kernels`` (in ``h100_fullsuite``: the whole suite's cohort gaps 19.3 s -> 13.4-13.9 s a pass,
twenty-seventh session). A capture beside a measurement is not nothing to it: of the batches that something
slowed, 39% overlapped another worker's preload against 25% of all batches (fb, fc), which ``runner.bench
disturbed`` reports from each result's ``window``.

``preload_candidate_kernels`` does the same for the ``torch_compile`` method's candidate, which kbench writes from
the task's own file (``executor.preload_candidate``; the worker checks the text before it imports it): its first
call at each shape, where torch.compile compiles and the compiled code's kernels load, is captured before the
token instead of inside the first shared phase (half the suite on an H200, warm: 204 of 222 shapes loaded, 107
of 111 correctness stages compiled nothing, cohort gaps 11.8 s -> 6.6 s, forty-fourth session).

A shape whose calls cannot be captured (a host read, a copy from pageable memory) is recorded as not done,
with the error; its kernels load at their first use as before. Without CUDA nothing is done.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from runner.worker.loading import as_output_list, build_model, import_file, make_inputs
from runner.worker.precision import Float64Unavailable, float64_calls, not_applicable

_MODULE_NAME = "kbench_task_preload"


def preload_reference_kernels(task_file: Path, shapes: dict, device: torch.device) -> dict:
    """Capture, never launch, the reference's calls at each of ``shapes`` ({name: dims}); the record: seconds
    taken, when (``window``: [start, end], epoch seconds, for ``runner.bench disturbed``, which checks the other
    evaluations' measured batches against it) and, per shape, ``"loaded"`` or why not."""
    if device.type != "cuda":
        return {"not done": "no CUDA device"}
    timer = _Timer()
    try:
        module = import_file(task_file, _MODULE_NAME)
    except Exception as exc:  # the reference stage imports it again and reports the failure there
        return timer.done({"not done": _why(exc)})
    try:
        return timer.done(_capture_each(lambda dims, _: _reference_calls(module, dims, device), shapes, device))
    finally:
        sys.modules.pop(_MODULE_NAME, None)


def preload_candidate_kernels(module, model_class, shapes: dict, device: torch.device) -> dict:
    """Capture, never launch, the candidate's construction, inputs and first call at each of ``shapes``, as
    ``preload_reference_kernels`` does the reference's; only for kbench's own ``torch_compile`` candidate (the
    worker checks its text, ``runner.methods.torch_compile.is_compiled_source``), already imported (``module``).

    Its first call at a shape is where torch.compile compiles: Dynamo's trace, Inductor's graph (read from the
    compile cache on a later pass) and the loading of its kernels, and the first use of a library's kernel (cuDNN
    compiles some of its engines on the host at their first call, about 1.2 s a shape for the convnext
    candidates' depthwise convolution, forty-third session). Compiled here, the code Dynamo keeps is the one the
    correctness stage calls on the same module (its guards: the shapes, the dtypes, the grad mode), and that
    stage's first call costs what a later one does. What cannot be done under a capture fails it: where the
    compile failed (a compile step that reads a value back or copies from host memory), that shape compiles at
    its first call as before; where only the compiled code's run did (a Triton autotuning that times its
    configurations), the compiled code is kept and its kernels load at their first use. The record is the
    reference's, with the graphs Dynamo compiled at each shape (``graphs_compiled``); the correctness stage adds
    how many it compiled itself (``graphs_compiled_in_correctness``)."""
    if device.type != "cuda":
        return {"not done": "no CUDA device"}
    timer, compiled = _Timer(), {}

    def calls(dims: dict, name: str) -> None:
        graphs = dynamo_graphs()
        try:
            _candidate_calls(module, model_class, dims, device)
        finally:  # compiled, whether or not its run could be captured after
            compiled[name] = dynamo_graphs() - graphs

    record = _capture_each(calls, shapes, device)
    record["graphs_compiled"] = compiled
    return timer.done(record)


def dynamo_graphs() -> int:
    """How many graphs Dynamo has compiled in this process (0 before torch.compile was first used)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0


class _Timer:
    """A preload's ``seconds`` and ``window`` ([start, end], epoch seconds), added to its record."""

    def __init__(self) -> None:
        self.started, self.began = time.perf_counter(), time.time()

    def done(self, record: dict) -> dict:
        record["seconds"] = round(time.perf_counter() - self.started, 4)
        record["window"] = [self.began, time.time()]
        return record


def _capture_each(calls_at, shapes: dict, device: torch.device) -> dict:
    """``calls_at(dims, name)`` captured and thrown away at each shape, on a stream of its own, without gradients;
    the graphs' memory given back to the device after."""
    record: dict = {"shapes": {}}
    try:
        stream = torch.cuda.Stream(device)
        with torch.cuda.stream(stream):
            # The BLAS handle's workspace for this stream, allocated now: inside a capture it would come from the
            # graph's pool, which is released below while the handle still points at it.
            torch.cuda.current_blas_handle()
        with torch.no_grad():
            for name, dims in shapes.items():
                record["shapes"][name] = _capture(lambda dims=dims, name=name: calls_at(dims, name), stream, device)
    finally:
        # The graphs' pools are released; their blocks go back to the device, not left reserved while this
        # evaluation waits (the others in flight may need them).
        torch.cuda.empty_cache()
    return record


def _reference_calls(module, dims: dict, device: torch.device) -> None:
    """What the reference stage calls at one shape, through the same functions: the model built, inputs made, the
    forward; where its outputs are all float32, the float64 layer's calls too. Not seeded: seeding is no
    capturable call, and the values are never used."""
    model = build_model(module.Model, module, dims, device, None)
    inputs = make_inputs(module, dims, device, None)
    outputs = as_output_list(model(*inputs))
    if isinstance(model, torch.nn.Module) and not not_applicable(outputs):
        try:
            float64_calls(model, inputs, outputs, device)
        except Float64Unavailable:  # over the budget: not called in the reference stage either
            pass


def _candidate_calls(module, model_class, dims: dict, device: torch.device) -> None:
    """What the correctness stage calls first at one shape: the candidate built, inputs made, its forward. Not
    seeded, as the reference's."""
    model = build_model(model_class, module, dims, device, None)
    model(*make_inputs(module, dims, device, None))


def _capture(calls, stream, device: torch.device) -> str:
    """Run ``calls`` under a stream capture in relaxed mode and throw the graph away; ``"loaded"``, or why not.

    The capture registers the device's default random generator with the graph, and a capture that fails
    leaves the generator's state marked as capturing: the next ``torch.randn`` outside any capture raised
    "Offset increment outside graph capture encountered unexpectedly" (batched_solve_small_fp32, whose
    ``torch.linalg.solve`` reads its error flags back, on the H100, twenty-sixth session). So the capture gets a
    clone of the generator's state, and the run's own state is put back after it, whatever happened."""
    index = device.index or 0
    generator = torch.cuda.default_generators[index]
    own_state = generator.graphsafe_get_state()
    generator.graphsafe_set_state(generator.clone_state())
    graph = torch.cuda.CUDAGraph()
    pool = torch.cuda.graph_pool_handle()
    failed = None
    try:
        with torch.cuda.stream(stream):
            graph.capture_begin(pool=pool, capture_error_mode="relaxed")
            try:
                calls()
            except Exception as exc:
                failed = _why(exc)
            try:
                graph.capture_end()
            except Exception as exc:  # the capture was invalidated: its allocations stop going to the pool
                failed = failed or _why(exc)
                torch._C._cuda_endAllocateToPool(index, pool)
                torch._C._cuda_releasePool(index, pool)
    finally:
        generator.graphsafe_set_state(own_state)
        del graph
    return f"not done: {failed}" if failed else "loaded"


def _why(exc: BaseException) -> str:
    """The error's first line and, where it wraps another (torch.compile's ``BackendCompilerFailed`` wraps what
    Inductor raised), the innermost one's: ``Outer: ... <- Inner: ...``."""
    line = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
    inner, seen = exc, {id(exc)}
    while (nested := getattr(inner, "inner_exception", None) or inner.__cause__) is not None and id(nested) not in seen:
        inner = nested
        seen.add(id(inner))
    if inner is exc:
        return line
    return f"{line} <- {type(inner).__name__}: {str(inner).strip()}".splitlines()[0][:400]
