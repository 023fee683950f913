"""``ltx-pipeline rm RUN``: remove a run: its rows in the store, its folder in the workspace, its Optuna studies.

Refused (exit 4) while anything works on the run: a driver holding its lock, or a process it launched
(trainer, preprocessing, trial, evaluation render) still alive, here or on another host of a shared store.
Refused too while any run's request names a path inside the folder: the user's own data is never removed,
and nothing outside the run's folder is touched (links inside it are removed, never followed). It asks
first on a terminal and needs ``--yes`` elsewhere. The order makes a failure at any point safe to repeat:
the studies, then the folder, then the store's rows in one transaction, so the run stays listed (and
``rm`` can be run again) until everything else is gone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ltx_pipeline.cli.options import WorkspaceOpt

if TYPE_CHECKING:
    from ltx_pipeline.store import Run, Store
    from ltx_pipeline.workspace import Workspace

__all__ = ["rm"]

# Request fields that name the user's own files or folders (run.yaml stores them absolute).
_USER_PATHS = ("dataset", "holdout_file", "surface", "model_path", "text_encoder_path", "trainer_root",
               "trainer_python", "nvidia_smi")


def rm(run: Annotated[str, typer.Argument(metavar="RUN", help="The run to remove (see `ltx-pipeline status`).",
                                          show_default=False)],
       workspace: WorkspaceOpt = None,
       yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking (needed when not on a "
                                                            "terminal).")] = False) -> int:
    """Remove a run: its records in the store, its folder in the workspace and its autotune studies.

    Your dataset and every file outside the run's folder stay. Refused while the run's driver or a
    process it launched (trainer, trial, render) is alive: stop it first (`ltx-pipeline stop`).
    """
    from ltx_pipeline.cli.console import out
    from ltx_pipeline.engine.lock import DriverLock
    from ltx_pipeline.errors import EXIT_OK, EXIT_REFUSED, BadRequest
    from ltx_pipeline.store import Store, saved_id
    from ltx_pipeline.workspace import Workspace

    ws = Workspace.at(workspace)
    store = Store.open(ws.store) if ws.has_store() else None
    runs = store.list_runs() if store is not None else []
    row = next((r for r in runs if r.name == run), None)
    if store is None or row is None:
        if not runs:
            raise BadRequest(f"No run named {run!r} in {ws.root}: this workspace has no runs", where="RUN",
                             fix="check --workspace (or $LTX_PIPELINE_WORKSPACE)")
        raise BadRequest(f"No run named {run!r} in {ws.root}", where="RUN",
                         fix="name one of its runs: " + ", ".join(r.name for r in runs))
    folder = ws.run(row.name).root
    _refuse_user_data(ws, folder, runs)
    _refuse_live(store, row)
    if not yes and not _confirmed(row.name, folder):
        out.print("Nothing removed.", markup=False)
        return EXIT_REFUSED
    with DriverLock(ws.run(row.name).lock_file, row.name, store=store):  # no driver starts meanwhile
        _refuse_live(store, row)
        studies = _remove_studies(ws, row.name)
        _remove_folder(folder)
        counts = store.delete_run(saved_id(row))
    records = f"{counts['phase_runs']} phase attempt(s), {counts['events']} event(s) and its other records"
    kept = f" Its dataset {row.request['dataset']} is kept." if row.request.get("dataset") else ""
    out.print(f"Removed run {row.name}: {records}, its folder {folder}"
              + "".join(f", Optuna study {name}" for name in studies) + f".{kept}", markup=False)
    return EXIT_OK


def _confirmed(name: str, folder: Path) -> bool:
    """The user's answer on a terminal; without one, a refusal naming ``--yes``."""
    from ltx_pipeline.errors import BadRequest

    if not sys.stdin.isatty():
        raise BadRequest(f"Removing run {name} needs a confirmation, and there is no terminal to ask on",
                         where="--yes", fix=f"pass --yes to remove it without asking: ltx-pipeline rm {name} --yes")
    return typer.confirm(f"Remove run {name}: its records in the store and its folder {folder}?", default=False)


def _refuse_live(store: Store, run: Run) -> None:
    """Refuse while a process the run launched is alive (its liveness as ``status`` and the runner judge it)."""
    from ltx_pipeline.engine.journal import RunJournal
    from ltx_pipeline.errors import Refused
    from ltx_pipeline.store import saved_id

    live = [p for p in store.processes(saved_id(run)) if p.status == "running" and RunJournal.handle(p).alive()]
    if live:
        what = ", ".join(f"{p.kind} of {p.phase} (pid {p.pid} on {p.host})" for p in live)
        raise Refused(f"Run {run.name} is still at work: {what} is alive", where=f"run {run.name}",
                      fix=f"stop it first (ltx-pipeline stop --run {run.name}) or let it finish, then rm again")


def _refuse_user_data(ws: Workspace, folder: Path, runs: list[Run]) -> None:
    """Refuse when a run's request (stored, or this run's run.yaml as edited) names a path inside ``folder``."""
    from ltx_pipeline.errors import Refused

    requests: list[tuple[str, dict[str, Any]]] = [(r.name, r.request or {}) for r in runs]
    requests += [(folder.name, _request_file(ws.run(folder.name).request_file))]
    inside = folder.resolve()
    for owner, request in requests:
        for field in _USER_PATHS:
            value = request.get(field)
            if not isinstance(value, str) or not value.strip() or "://" in value:
                continue
            path = Path(value).expanduser()
            if path.is_absolute() and path.resolve().is_relative_to(inside):
                raise Refused(f"The {field.replace('_', ' ')} of run {owner} lies inside the folder rm would remove: "
                              f"{value}", where=str(folder),
                              fix=f"move it out of {folder} (and point that run's run.yaml at its new place), "
                                  "then rm again")


def _request_file(path: Path) -> dict[str, Any]:
    """run.yaml as the user left it (edits not yet resumed included); an unreadable one adds nothing."""
    import yaml

    from ltx_pipeline.yaml_io import load_yaml

    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _remove_studies(ws: Workspace, name: str) -> list[str]:
    from ltx_pipeline.autotune.study import delete_run_studies

    return delete_run_studies(ws.root, name)


def _remove_folder(folder: Path) -> None:
    """Remove the run's folder; a link is removed itself, never what it points to (nor any link inside)."""
    import shutil

    from ltx_pipeline.errors import Refused

    try:
        if folder.is_symlink():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
    except OSError as exc:
        raise Refused(f"Could not remove {exc.filename or folder}: {exc.strerror or exc}", where=str(folder),
                      fix="fix its permissions, then rm again (the run stays listed until its folder is gone)") from exc
