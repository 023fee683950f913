"""Removing a run: its rows in the store, its folder in the workspace, its Optuna studies.

Refused (``Refused``, exit 4) while anything works on the run: a driver holding its lock, or a process it
launched (trainer, preprocessing, trial, evaluation render) still alive, here or on another host of a
shared store. Refused too while any run's request names a path inside the folder: the user's own data is
never removed, and nothing outside the run's folder is touched (links inside it are removed, never
followed). The order makes a failure at any point safe to repeat: the studies, then the folder, then the
store's rows in one transaction, so the run stays listed (and can be removed again) until all else is gone;
last, its use record in the latent cache is dropped (``cache.forget_run``), so ``cache prune`` may free the
entries only it used (dropped earlier, a run still listed could lose entries it would need on a resume).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.cache import forget_run
from ltx_pipeline.engine.journal import RunJournal
from ltx_pipeline.engine.lock import DriverLock
from ltx_pipeline.errors import BadRequest, Refused
from ltx_pipeline.preprocessing.cache_plan import cache_store
from ltx_pipeline.store import Run, Store, saved_id
from ltx_pipeline.workspace import Workspace
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["Removal", "Removed", "removal", "remove"]

# Request fields that name the user's own files or folders (run.yaml stores them absolute).
_USER_PATHS = ("dataset", "holdout_file", "surface", "model_path", "text_encoder_path", "trainer_root",
               "trainer_python", "nvidia_smi")


@dataclass(frozen=True)
class Removal:
    """A run that may be removed now (checked by ``removal``): what ``remove`` takes."""

    workspace: Workspace
    store: Store
    run: Run
    folder: Path


@dataclass(frozen=True)
class Removed:
    """What ``remove`` removed: the run's folder, its Optuna studies, and its rows by table."""

    run: str
    folder: Path
    studies: list[str]
    counts: dict[str, int]
    dataset: str | None  # the run's dataset, kept
    cache_uses_forgotten: bool = False  # its use record in the latent cache was dropped


def removal(workspace: Path | None, name: str) -> Removal:
    """The run called ``name``, checked for removal: nothing alive works on it, no user data lies in its folder.

    Raises:
        BadRequest: no run of that name (naming the workspace's runs).
        Refused: a process of the run is alive, or a run's request names a path inside its folder.
    """
    ws = Workspace.at(workspace)
    store = Store.open(ws.store) if ws.has_store() else None
    runs = store.list_runs() if store is not None else []
    row = next((r for r in runs if r.name == name), None)
    if store is None or row is None:
        if not runs:
            raise BadRequest(f"No run named {name!r} in {ws.root}: this workspace has no runs", where="RUN",
                             fix="check --workspace (or $LTX_PIPELINE_WORKSPACE)")
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="RUN",
                         fix="name one of its runs: " + ", ".join(r.name for r in runs))
    folder = ws.run(row.name).root
    _refuse_user_data(ws, folder, runs)
    _refuse_live(store, row)
    return Removal(ws, store, row, folder)


def remove(removal: Removal) -> Removed:
    """Remove the run under its driver lock (no driver starts meanwhile), checking again that nothing is alive.

    Raises:
        RunLocked: a driver holds the run.
        Refused: a process of the run came alive, or its folder could not be removed.
    """
    ws, store, row = removal.workspace, removal.store, removal.run
    with DriverLock(ws.run(row.name).lock_file, row.name, store=store):
        _refuse_live(store, row)
        studies = _remove_studies(ws, row.name)
        _remove_folder(removal.folder)
        counts = store.delete_run(saved_id(row))
        cache = cache_store(ws.root)  # the cache the run's preprocessing used (none when it is off)
        forgotten = cache is not None and cache.root.is_dir() and forget_run(cache.root, ws.root, row.name)
    return Removed(row.name, removal.folder, studies, counts, row.request.get("dataset") or None, forgotten)


def _refuse_live(store: Store, run: Run) -> None:
    """Refuse while a process the run launched is alive (its liveness as ``status`` and the runner judge it)."""
    live = [p for p in store.processes(saved_id(run)) if p.status == "running" and RunJournal.handle(p).alive()]
    if live:
        what = ", ".join(f"{p.kind} of {p.phase} (pid {p.pid} on {p.host})" for p in live)
        raise Refused(f"Run {run.name} is still at work: {what} is alive", where=f"run {run.name}",
                      fix=f"stop it first (ltx-pipeline stop --run {run.name}) or let it finish, then rm again")


def _refuse_user_data(ws: Workspace, folder: Path, runs: list[Run]) -> None:
    """Refuse when a run's request (stored, or this run's run.yaml as edited) names a path inside ``folder``."""
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
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _remove_studies(ws: Workspace, name: str) -> list[str]:
    from ltx_pipeline.autotune.study import delete_run_studies  # Optuna's storage: loaded only to remove

    return delete_run_studies(ws.root, name)


def _remove_folder(folder: Path) -> None:
    """Remove the run's folder; a link is removed itself, never what it points to (nor any link inside)."""
    try:
        if folder.is_symlink():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
    except OSError as exc:
        raise Refused(f"Could not remove {exc.filename or folder}: {exc.strerror or exc}", where=str(folder),
                      fix="fix its permissions, then rm again (the run stays listed until its folder is gone)") from exc
