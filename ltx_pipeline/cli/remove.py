"""``ltx-pipeline rm RUN``: remove a run: its rows in the store, its folder in the workspace, its Optuna studies.

What may be removed, and the removal itself, are ``driving.remove``'s (refused while anything works on
the run, or while a run's request names a path inside its folder). This command asks first on a terminal,
needs ``--yes`` elsewhere, and says what was removed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ltx_pipeline.cli import Ending
from ltx_pipeline.cli.options import WorkspaceOpt

__all__ = ["rm"]


def rm(run: Annotated[str, typer.Argument(metavar="RUN", help="The run to remove (see `ltx-pipeline status`).",
                                          show_default=False)],
       workspace: WorkspaceOpt = None,
       yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking (needed when not on a "
                                                            "terminal).")] = False) -> Ending:
    """Remove a run: its records in the store, its folder in the workspace and its autotune studies.

    Your dataset and every file outside the run's folder stay. Refused while the run's driver or a
    process it launched (trainer, trial, render) is alive: stop it first (`ltx-pipeline stop`).
    """
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.driving import removal, remove

    target = removal(workspace, run)
    if not yes and not _confirmed(target.run.name, target.folder):
        out.print("Nothing removed.", markup=False)
        return Ending.DECLINED
    removed = remove(target)
    counts = removed.counts
    records = f"{counts['phase_runs']} phase attempt(s), {counts['events']} event(s) and its other records"
    kept = f" Its dataset {removed.dataset} is kept." if removed.dataset else ""
    out.print(f"Removed run {removed.run}: {records}, its folder {removed.folder}"
              + "".join(f", Optuna study {name}" for name in removed.studies) + f".{kept}", markup=False)
    return Ending.DONE


def _confirmed(name: str, folder: Path) -> bool:
    """The user's answer on a terminal; without one, a refusal naming ``--yes``."""
    from ltx_pipeline.errors import BadRequest

    if not sys.stdin.isatty():
        raise BadRequest(f"Removing run {name} needs a confirmation, and there is no terminal to ask on",
                         where="--yes", fix=f"pass --yes to remove it without asking: ltx-pipeline rm {name} --yes")
    return typer.confirm(f"Remove run {name}: its records in the store and its folder {folder}?", default=False)
