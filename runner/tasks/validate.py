"""The task validator: proves a task is not degenerate before anyone benchmarks it.

For each shape it checks, on the given device: the reference is deterministic for a seed;
the output depends on every input and every parameter; it is not near-constant across
seeds; degenerate candidates (zeros, a constant, the first input, random values, and for
fp32 tasks the reference computed in bf16) fail the correctness comparison; integer
outputs keep an integer dtype; the reference passes the worker's integrity checks (no
aliasing, mutation or caching); the small shape runs on a CPU in well under a second.
On a GPU it also measures each performance shape's eager time and peak memory, which must
lie inside the suite's window (0.5-20 ms, under 24 GB with room for a candidate) unless the
task states why not (``window_exception`` in its metadata).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from runner.gpu.events import event_times_ms
from runner.tasks.model import Task
from runner.worker.compare import compare_outputs
from runner.worker.integrity import call_violation, snapshot_inputs
from runner.worker.loading import as_output_list, build_model, import_file, make_inputs

SMALL_SHAPE_SECONDS = 1.0
EAGER_WINDOW_MS = (0.5, 20.0)
# A 24 GB card must hold the reference's peak plus a candidate's: half of it for the reference.
PEAK_LIMIT_BYTES = 12 << 30
_SEED_A, _SEED_B = 1234, 98765


@dataclass
class TaskValidation:
    task_id: str
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    peak_bytes: int | None = None
    eager_ms: dict[str, float] = field(default_factory=dict)  # GPU: median eager time per shape

    @property
    def ok(self) -> bool:
        return not self.failures


def validate_task(task: Task, device: str = "cpu", shapes: list[str] | None = None) -> TaskValidation:
    report = TaskValidation(task.task_id)
    started = time.perf_counter()
    try:
        module = import_file(task.path, f"kbench_validate_{task.task_id.replace('/', '_')}")
    except Exception as exc:  # a task that cannot import is reported, not raised
        report.failures.append(f"import: {type(exc).__name__}: {exc}")
        return report
    dev = torch.device(device)
    if shapes is None:
        # On a CPU only the small shape is affordable; a GPU checks every declared shape.
        shapes = ["small"] if dev.type == "cpu" else task.shape_names()
    for shape_name in shapes:
        if shape_name not in task.shapes:
            continue
        try:
            _validate_shape(task, module, shape_name, dev, report)
            if dev.type == "cuda" and shape_name != "small":
                _check_window(task, module, shape_name, dev, report)
        except Exception as exc:
            report.failures.append(f"{shape_name}: {type(exc).__name__}: {exc}")
    report.seconds = time.perf_counter() - started
    return report


def _check_window(task: Task, module, shape_name: str, dev: torch.device, report: TaskValidation) -> None:
    """Eager time (median of 20 after 5 warm-ups, CUDA events, L2 not flushed) and peak memory."""
    dims = task.shapes[shape_name]
    model = build_model(module.Model, module, dims, dev, 0)
    inputs = make_inputs(module, dims, dev, _SEED_A)
    with torch.no_grad():
        times = sorted(event_times_ms(lambda: model(*inputs), repeats=20, warmup=5))
    report.eager_ms[shape_name] = times[len(times) // 2]
    if task.window_exception:
        return
    low, high = EAGER_WINDOW_MS
    if not low <= report.eager_ms[shape_name] <= high:
        report.failures.append(
            f"{shape_name}: eager {report.eager_ms[shape_name]:.3f} ms outside {low}-{high} ms "
            "(or state a window_exception)"
        )
    if report.peak_bytes and report.peak_bytes > PEAK_LIMIT_BYTES:
        report.failures.append(f"{shape_name}: peak memory {report.peak_bytes / 2**30:.1f} GiB over {PEAK_LIMIT_BYTES >> 30} GiB")


def _run(module, dims, dev, seed_inputs, seed_model=0, inputs=None, model=None):
    if model is None:
        model = build_model(module.Model, module, dims, dev, seed_model)
    if inputs is None:
        inputs = make_inputs(module, dims, dev, seed_inputs)
    with torch.no_grad():
        return as_output_list(model(*inputs)), inputs, model


def _validate_shape(task: Task, module, shape_name: str, dev: torch.device, report: TaskValidation) -> None:
    dims = task.shapes[shape_name]
    tol = task.tolerance
    fail = report.failures.append
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    started = time.perf_counter()
    out_a, inputs_a, model = _run(module, dims, dev, _SEED_A)
    elapsed = time.perf_counter() - started
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        report.peak_bytes = max(report.peak_bytes or 0, torch.cuda.max_memory_allocated(dev))
    if shape_name == "small" and dev.type == "cpu":
        if elapsed > SMALL_SHAPE_SECONDS:
            # The first call in a process pays once for what the op loads and sets up (label_smoothed_cross_entropy_fp32
            # took 1.69 s cold, 0.2 s after, in a full `make test` on a 2-core machine): the limit is on a warm call.
            started = time.perf_counter()
            _run(module, dims, dev, _SEED_A, model=model, inputs=inputs_a)
            elapsed = time.perf_counter() - started
        if elapsed > SMALL_SHAPE_SECONDS:
            fail(f"small: {elapsed:.2f}s on the CPU, warm (limit {SMALL_SHAPE_SECONDS}s)")
    # The reference itself must not alias, mutate or cache: the corpus flags exactly that in candidates.
    probe_inputs = make_inputs(module, dims, dev, _SEED_A)
    snapshots = snapshot_inputs(probe_inputs)
    with torch.no_grad():
        probe_outputs = as_output_list(model(*probe_inputs))
    violation = call_violation(probe_inputs, snapshots, probe_outputs, out_a)
    if violation is not None:
        fail(f"{shape_name}: the reference itself fails an integrity check ({violation[0]}: {violation[1]})")
    again, _, _ = _run(module, dims, dev, _SEED_A)
    if not _same(out_a, again):
        fail(f"{shape_name}: not deterministic for a fixed seed")
    out_b, inputs_b, _ = _run(module, dims, dev, _SEED_B, model=model)
    if compare_outputs(out_a, out_b, tol).ok:
        fail(f"{shape_name}: output is near-constant across seeds")
    for index, (a, b) in enumerate(zip(inputs_a, inputs_b)):
        if not isinstance(a, torch.Tensor) or torch.equal(a, b):
            continue
        mixed = list(inputs_a)
        mixed[index] = b
        moved, _, _ = _run(module, dims, dev, _SEED_A, inputs=mixed, model=model)
        if compare_outputs(out_a, moved, tol).ok:
            fail(f"{shape_name}: output does not depend on input {index}")
    for name, tensor in _floating_state(model):
        saved = tensor.detach().clone()
        with torch.no_grad():
            tensor.add_(torch.randn_like(tensor) * (saved.abs().mean() + 1e-3))
        moved, _, _ = _run(module, dims, dev, _SEED_A, inputs=inputs_a, model=model)
        with torch.no_grad():
            tensor.copy_(saved)
        if compare_outputs(out_a, moved, tol).ok:
            fail(f"{shape_name}: output does not depend on parameter {name}")
    for label, fake in _degenerate_candidates(out_a, out_b, inputs_a):
        if compare_outputs(out_a, fake, tol).ok:
            fail(f"{shape_name}: the degenerate candidate '{label}' passes")
    if task.dtype == "float32":
        low = _bf16_reference(module, dims, dev, inputs_a)
        if low is not None and compare_outputs(out_a, low, tol).ok:
            fail(f"{shape_name}: a bf16 downcast of the reference passes the fp32 tolerance")
    if task.dtype not in ("float64", "float32", "float16", "bfloat16"):
        for index, out in enumerate(out_a):
            if isinstance(out, torch.Tensor) and out.is_floating_point() and not task.dtype.startswith("float8"):
                fail(f"{shape_name}: output {index} is {out.dtype} in an integer task")


def _same(a: list, b: list) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)):
                return False
        elif x != y:
            return False
    return len(a) == len(b)


def _floating_state(model) -> list[tuple[str, torch.Tensor]]:
    if not isinstance(model, torch.nn.Module):
        return []
    state = list(model.named_parameters()) + list(model.named_buffers())
    return [(name, t) for name, t in state if t.is_floating_point() and t.numel() > 0]


def _degenerate_candidates(outputs: list, other_outputs: list, inputs: list):
    """Cheats that must fail. The constant is the mean of the output for *other* inputs: a
    fixed value a lazy candidate could hard-code (for a scalar output, the mean of this
    output would be the output itself)."""

    def each(make):
        return [make(o) if isinstance(o, torch.Tensor) else o for o in outputs]

    def constant(o, other):
        mean = other.double().nan_to_num().mean()
        return torch.full_like(o, float(mean) if o.is_floating_point() else int(mean))

    yield "zeros", each(torch.zeros_like)
    yield (
        "constant",
        [constant(o, other) if isinstance(o, torch.Tensor) else o for o, other in zip(outputs, other_outputs)],
    )
    yield (
        "random",
        each(
            lambda o: (
                torch.randn_like(o)
                if o.is_floating_point()
                else torch.randint_like(o, -3, 4)
                if o.dtype != torch.bool
                else torch.rand(o.shape, device=o.device) > 0.5
            )
        ),
    )
    first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
    if first is not None and len(outputs) == 1 and isinstance(outputs[0], torch.Tensor):
        if first.shape == outputs[0].shape:
            yield "first input", [first.to(outputs[0].dtype)]


def _bf16_reference(module, dims, dev, inputs) -> list | None:
    model = build_model(module.Model, module, dims, dev, 0)
    if isinstance(model, torch.nn.Module):
        model = model.to(torch.bfloat16)
    low_inputs = [x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    try:
        with torch.no_grad():
            outputs = as_output_list(model(*low_inputs))
    except RuntimeError:
        return None  # an op without a bf16 kernel on this device: nothing to check
    return [o.to(torch.float32) if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in outputs]


def validate_paths(paths: list[Path]) -> list[TaskValidation]:
    """Validate task files given by path (for authors checking a new task)."""
    from runner.tasks.model import read_native_task

    return [validate_task(read_native_task(path)) for path in paths]


if __name__ == "__main__":
    import sys

    results = validate_paths([Path(p) for p in sys.argv[1:]])
    for result in results:
        status = "ok  " if result.ok else "FAIL"
        print(f"{status} {result.task_id} ({result.seconds:.2f}s)")
        for failure in result.failures:
            print(f"     - {failure}")
    sys.exit(0 if all(r.ok for r in results) else 1)
