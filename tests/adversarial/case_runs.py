"""What the adversarial corpora share: a case's stated verdict, and one real run over a set of cases.

Each case file states ``# expect: <verdict> [<reason>]`` on its first line (and may name its task
with ``# task: <name>`` on the second, from ``tasks/``). ``run_cases`` lays the cases out as a
KernelBench folder with one task per case and runs ``kbench run`` over them with the directory
method under a given integrity policy.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SMALL_TASK, kbench, make_kernelbench_dir

TASKS_DIR = Path(__file__).parent / "tasks"


def expected_verdict(path: Path) -> tuple[str, str]:
    words = path.read_text().splitlines()[0].removeprefix("# expect:").split()
    return words[0], words[1] if len(words) > 1 else ""


def task_source(path: Path) -> str:
    """The task a case runs against: the one its ``# task:`` line names, else the small linear task."""
    lines = path.read_text().splitlines()
    if len(lines) > 1 and lines[1].startswith("# task:"):
        return (TASKS_DIR / f"{lines[1].removeprefix('# task:').strip()}.py").read_text()
    return SMALL_TASK


def run_cases(tmp: Path, cases: list[Path], policy: str, run_name: str, *overrides: str, env=None) -> Path:
    """One ``kbench run`` over ``cases`` (task ``<i>_<case name>`` each); its run folder."""
    names = [f"{i}_{path.stem}" for i, path in enumerate(cases, 1)]
    suite = tmp / "kb"
    cands = tmp / "cands" / "level1"
    cands.mkdir(parents=True)
    for name, path in zip(names, cases):
        make_kernelbench_dir(suite, [name], task_source(path))
        (cands / f"{name}.py").write_text(path.read_text())
    proc = kbench(
        "run",
        "suite=kernelbench",
        f"suite.path={suite}",
        "method=directory",
        f"method.directory.path={tmp / 'cands'}",
        f"method.directory.integrity_policy={policy}",
        "tracking=off",
        f"run.name={run_name}",
        *overrides,
        cwd=tmp,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = (tmp / "runs").iterdir()
    return run_dir
