"""The terminal's ``Reporter``: a rich progress bar for counted work inside a phase (reading clips)
and the training bar, both fed through ``ctx.reporter``.

Narration stays the record (start and end are events); the bars are only what the user watches
meanwhile. The count bar draws on stderr, so stdout keeps only results, and it renders nothing
when stderr is not a terminal.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from ltx_pipeline.cli.console import err
from ltx_pipeline.engine.reporting import Snapshot

__all__ = ["CountProgressBar", "TerminalReporter"]


class CountProgressBar:
    """One bar per label, removed when its count is complete; ``close()`` stops the display."""

    def __init__(self) -> None:
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(bar_width=40),
                                 MofNCompleteColumn(), TimeRemainingColumn(), console=err, transient=True)
        self.tasks: dict[str, TaskID] = {}
        self.started = False

    def __call__(self, label: str, done: int, total: int) -> None:
        if not self.started:
            self.progress.start()
            self.started = True
        task = self.tasks.get(label)
        if task is None:
            task = self.tasks[label] = self.progress.add_task(label, total=total)
        self.progress.update(task, completed=done, total=total)
        if done >= total:
            self.progress.remove_task(task)
            del self.tasks[label]

    def close(self) -> None:
        if self.started:
            self.progress.stop()
            self.started = False


class TerminalReporter:
    """The reporter of a drive run from the CLI: counts to ``counts``, training snapshots to ``training``."""

    shows_progress = True

    def __init__(self, training: Callable[[Snapshot], None], counts: CountProgressBar) -> None:
        self.training = training
        self.counts = counts

    def on_count(self, label: str, done: int, total: int) -> None:
        self.counts(label, done, total)

    def on_progress(self, snapshot: Snapshot) -> None:
        self.training(snapshot)
