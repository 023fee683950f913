"""A drive on the terminal: the runner's events, the progress bars, each gate ``--approve`` passed, and
where the run stopped, with the commands that go on from there.

What the drive does is ``ltx_pipeline.driving.drive``'s; this module only shows it. Its outcome goes back
to ``cli.main``, which turns it into the exit code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltx_pipeline.cli import Ending, ending_of
from ltx_pipeline.cli.console import err, out
from ltx_pipeline.cli.progress import CountProgressBar, TerminalReporter
from ltx_pipeline.cli.render import print_event
from ltx_pipeline.cli.training import TrainingProgressBar
from ltx_pipeline.driving import Approval, DriveHooks, Driven, drive
from ltx_pipeline.engine import Outcome

if TYPE_CHECKING:
    from ltx_pipeline.engine.options import RunOptions
    from ltx_pipeline.request import RunRequest
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.workspace import Workspace

__all__ = ["watch_drive"]


def watch_drive(ws: Workspace, store: Store, run: Run, request: RunRequest, approve: bool,
                options: RunOptions | None = None) -> Ending:
    """Drive the run (``--approve``: through every gate), showing it; return how the command ended."""
    bar, counts = TrainingProgressBar(out), CountProgressBar()
    hooks = DriveHooks(on_event=_print_event, reporter=TerminalReporter(bar, counts), on_approved=_print_approved)
    try:
        driven = drive(ws, store, run, request, approve_as="run --approve" if approve else None, options=options,
                       hooks=hooks)
    finally:
        bar.close()
        counts.close()
    _print_end(ws, driven)
    return ending_of(driven.outcome)


def _print_event(message: str, level: str, phase: str | None) -> None:
    print_event(out if level in ("info", "result") else err, message, level, phase)


def _print_approved(approval: Approval) -> None:
    # --approve passes every gate (the plan, then the prepared captions), each once, and says so.
    out.print(f"{approval.gate.name} {approval.gate.subject[:19]}… approved by --approve.", markup=False)


def _print_end(ws: Workspace, driven: Driven) -> None:
    target = f"--workspace {ws.root} --run {driven.run}"
    if driven.gate is not None:
        gate = driven.gate
        what = (f"the captions shown above (all in {gate.review}; edit it by hand and resume to change any)"
                if gate.captions else gate.review)
        out.print(f"Stopped at the {'captions approval gate' if gate.captions else 'approval gate'}. Read {what}, "
                  "then:", markup=False)
        if gate.blockers:
            out.print("  (approve will refuse until these are provided: " + "; ".join(gate.blockers) + ")",
                      markup=False)
        out.print(f"  ltx-pipeline approve {target}\n  ltx-pipeline resume {target}", markup=False)
    elif driven.outcome is Outcome.DETACHED:
        out.print(f"Run {driven.run} goes on without this process. Re-attach: ltx-pipeline resume {target}; "
                  f"stop it: ltx-pipeline stop {target}; check it: ltx-pipeline status {target}", markup=False)
    else:
        out.print(f"Run {driven.run} finished: see {ws.run(driven.run).outputs / 'run-summary.md'}", markup=False)
