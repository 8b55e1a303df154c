"""Every task loads and passes the validator; suite locks match the task files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runner.paths import SUITES_DIR, TASKS_DIR
from runner.tasks.formulas import FormulaError, evaluate
from runner.tasks.loader import load_native_tasks
from runner.tasks.model import TaskError, read_native_task
from runner.tasks.suites import SuiteSelection, resolve_suite, write_locks
from runner.tasks.validate import validate_task

TASKS = load_native_tasks(TASKS_DIR)


def test_suite_size():
    assert len(TASKS) >= 30
    assert len({task.category for task in TASKS}) >= 8


def test_locks_are_current(tmp_path: Path):
    """Fails when a task changed (or was added) without `kbench tasks lock`."""
    copy = tmp_path / "suites"
    copy.mkdir()
    for path in SUITES_DIR.glob("*.yaml"):
        (copy / path.name).write_text(path.read_text())
    write_locks(TASKS_DIR, copy)
    stale = [
        p.name
        for p in copy.glob("*.yaml")
        if not (SUITES_DIR / p.name).exists()
        or yaml.safe_load(p.read_text()) != yaml.safe_load((SUITES_DIR / p.name).read_text())
    ]
    assert not stale, f"run `kbench tasks lock`: {stale}"


@pytest.mark.parametrize("name", sorted(p.stem for p in SUITES_DIR.glob("*.yaml")))
def test_every_suite_resolves(name):
    assert resolve_suite(SuiteSelection(name), TASKS_DIR, SUITES_DIR)


def test_shards_split_a_suite_into_interleaved_parts():
    """N runs with ``suite.shard=K/N`` cover the selection once between them, in its order, each a mix of
    its categories; ``limit`` then cuts the shard."""
    whole = resolve_suite(SuiteSelection("full"), TASKS_DIR, SUITES_DIR)
    parts = [resolve_suite(SuiteSelection("full", shard=f"{k}/3"), TASKS_DIR, SUITES_DIR) for k in (1, 2, 3)]
    assert [t.task_id for t in parts[0]] == [t.task_id for t in whole[0::3]]
    assert sorted(t.task_id for part in parts for t in part) == sorted(t.task_id for t in whole)
    assert all(abs(len(part) - len(whole) / 3) < 1 for part in parts)
    assert all(len({t.category for t in part}) > 1 for part in parts)
    cut = resolve_suite(SuiteSelection("full", shard="2/3", limit=4), TASKS_DIR, SUITES_DIR)
    assert cut == parts[1][:4]
    activation = resolve_suite(SuiteSelection("full", categories=("activation",), shard="2/2"), TASKS_DIR, SUITES_DIR)
    assert activation == [t for t in whole if t.category == "activation"][1::2]


@pytest.mark.parametrize("shard", ["0/2", "3/2", "1/0", "x", "1/2/3", "-1/2", "1/"])
def test_a_bad_shard_is_one_line(shard):
    with pytest.raises(TaskError, match=r"^suite\.shard must be K/N with 1 <= K <= N, e\.g\. 1/2 \(got '"):
        resolve_suite(SuiteSelection("full", shard=shard), TASKS_DIR, SUITES_DIR)


def test_changed_task_refuses_its_suite(tmp_path: Path):
    tasks = tmp_path / "tasks" / "activation"
    tasks.mkdir(parents=True)
    source = (TASKS_DIR / "activation" / "gelu_tanh.py").read_text()
    (tasks / "gelu_tanh.py").write_text(source)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "one.yaml").write_text(
        yaml.safe_dump({"name": "one", "description": "", "tasks": [{"id": "gelu_tanh", "hash": "x"}]})
    )
    write_locks(tmp_path / "tasks", suites)
    assert resolve_suite(SuiteSelection("one"), tmp_path / "tasks", suites)
    (tasks / "gelu_tanh.py").write_text(source + "\n# edited\n")
    with pytest.raises(TaskError, match="changed since the lock"):
        resolve_suite(SuiteSelection("one"), tmp_path / "tasks", suites)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace('"category": "activation"', '"category": "matmul"'), "does not match its folder"),
        (lambda s: s.replace('"flops": "10 * tokens * hidden"', '"flops": "__import__(1)"'), "flops"),
        (lambda s: s.replace('"flops": "10 * tokens * hidden"', '"flops": "10 * rows"'), "unknown name"),
        (lambda s: s.replace("def get_inputs", "def get_inputz"), "missing get_inputs"),
        (lambda s: s.replace('"dtype": "float32"', '"dtype": "float31"'), "dtype"),
    ],
)
def test_malformed_task_is_refused(tmp_path: Path, edit, message):
    folder = tmp_path / "activation"
    folder.mkdir()
    bad = folder / "gelu_tanh.py"
    bad.write_text(edit((TASKS_DIR / "activation" / "gelu_tanh.py").read_text()))
    with pytest.raises(TaskError, match=message):
        read_native_task(bad)


def test_formulas_are_arithmetic_only():
    assert evaluate("2 * m * n * k + max(m, 1)", {"m": 2, "n": 3, "k": 4}) == 50
    for hostile in ("__import__('os')", "m.__class__", "[m]", "lambda: 1"):
        with pytest.raises(FormulaError):
            evaluate(hostile, {"m": 1})


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_task_validates_on_cpu(task):
    outcome = validate_task(task, device="cpu")
    assert outcome.ok, outcome.failures


def test_scalar_output_task_is_not_called_constant(tmp_path: Path):
    """Regression: the 'constant' cheat used the output's own mean, so every scalar loss failed."""
    folder = tmp_path / "loss"
    folder.mkdir()
    source = (TASKS_DIR / "activation" / "gelu_tanh.py").read_text()
    source = source.replace('"category": "activation"', '"category": "loss"').replace(
        'return torch.nn.functional.gelu(x, approximate="tanh")', "return (x * x).mean()"
    )
    (folder / "mean_square.py").write_text(source)
    outcome = validate_task(read_native_task(folder / "mean_square.py"))
    assert outcome.ok, outcome.failures


@pytest.mark.parametrize(("slow_calls", "fails"), [(1, False), (2, True)])
def test_the_small_shapes_cpu_limit_is_on_a_warm_call(tmp_path, slow_calls, fails):
    """A first call that pays once for what its op sets up (1.2-1.7 s in a loaded `make test`) is not the shape's
    speed: the limit judges a second call where the first is over it; a shape slow on every call still fails."""
    folder = tmp_path / "activation"
    folder.mkdir()
    source = (TASKS_DIR / "activation" / "gelu_tanh.py").read_text()
    source += f"""

import time as _time

_calls = [0]
_forward = Model.forward


def _slow_at_first(self, x):
    _calls[0] += 1
    if _calls[0] <= {slow_calls}:
        _time.sleep(1.1)
    return _forward(self, x)


Model.forward = _slow_at_first
"""
    (folder / "gelu_tanh.py").write_text(source)
    outcome = validate_task(read_native_task(folder / "gelu_tanh.py"), device="cpu")
    slow = [failure for failure in outcome.failures if "on the CPU, warm" in failure]
    assert bool(slow) == fails, outcome.failures
