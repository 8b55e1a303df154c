"""What the adversarial corpora share: a case's stated verdict, and one real run over a set of cases.

Each case file states ``# expect: <verdict> [<reason>]`` on its first line, or one verdict per
device (``# expect: cuda: <verdict> [<reason>]; cpu: <verdict> [<reason>]``), and may name its task
with ``# task: <name>`` on the second, from ``tasks/``. ``run_cases`` lays the cases out as a
KernelBench folder with one task per case and runs ``kbench run`` over them with the directory
method under a given integrity policy.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SMALL_TASK, kbench, make_kernelbench_dir

TASKS_DIR = Path(__file__).parent / "tasks"


def expected_verdict(path: Path, device: str | None = None) -> tuple[str, str]:
    """``(verdict, reason)`` as the case states it; ``device`` (``cpu`` | ``cuda``) picks one of per-device verdicts.

    A case whose outcome depends on what the device lets the runner see states one verdict per
    device, ``# expect: cuda: <verdict> [<reason>]; cpu: <verdict> [<reason>]``, and must be asked for one.
    """
    stated = path.read_text().splitlines()[0].removeprefix("# expect:")
    if ":" not in stated:
        return _verdict_words(stated)
    per_device = {name.strip(): words for name, words in (part.split(":", 1) for part in stated.split(";"))}
    if device not in per_device:
        raise ValueError(f"{path.name} states verdicts for {sorted(per_device)}, not for device {device!r}")
    return _verdict_words(per_device[device])


def _verdict_words(text: str) -> tuple[str, str]:
    words = text.split()
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
