"""Progress of a run: a bar with counts and ETA on a terminal, one line per evaluation always."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from runner.worker.protocol import Result

_COLOURS = {"correct": "green", "incorrect": "red", "timeout": "magenta", "infra_error": "bold red"}


class RunProgress:
    def __init__(self, total: int, done: int, console: Console, enabled: bool = True) -> None:
        self.console = console
        self.counts: Counter[str] = Counter()
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[verdicts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=total, completed=done, verdicts="")

    def __enter__(self) -> RunProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def working_on(self, label: str) -> None:
        self.progress.update(self.task, description=label)

    def finished(self, result: Result, label: str) -> None:
        status = result.verdict.status
        self.counts[status] += 1
        speed = f" speedup {result.timing.speedup:.3f}" if result.timing else ""
        colour = _COLOURS.get(status, "yellow")
        reason = f" ({result.verdict.reason})" if result.verdict.reason else ""
        self.console.print(f"[{colour}]{status:<19}[/] {label}{speed}{reason}")
        summary = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        self.progress.update(self.task, advance=1, verdicts=summary)
