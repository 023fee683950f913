"""Which workspace and which run a command means: opened, found, or refused with one line.

A command refused before it has anything to record leaves the workspace as it found it:
``find_workspace`` opens a store only where one exists; ``open_workspace`` (for commands that always
record something) creates the folder and the store.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.store import Run, Store
from ltx_pipeline.workspace import Workspace

__all__ = ["existing_run", "find_workspace", "latest_run_name", "open_workspace"]


def open_workspace(workspace: Path | None) -> tuple[Workspace, Store]:
    """The workspace (created if missing) and its store, upgraded to the newest schema."""
    ws = Workspace.at(workspace)
    ws.create()
    return ws, Store.open(ws.store)


def find_workspace(workspace: Path | None) -> tuple[Workspace, Store | None]:
    """The workspace and its store when it has one (upgraded to the newest schema), else None.

    Creates nothing: ``prepare_run`` creates the folder and the store once a new run is accepted.
    """
    ws = Workspace.at(workspace)
    return ws, (Store.open(ws.store) if ws.has_store() else None)


def latest_run_name(store: Store | None) -> str:
    """The name of the run updated last (None: the workspace has no store yet, so no runs).

    Raises:
        BadRequest: the workspace has no runs.
    """
    runs = store.list_runs() if store is not None else []
    if not runs:
        raise BadRequest("This workspace has no runs", where="--workspace", fix="start one with `ltx-pipeline run`")
    return max(runs, key=lambda r: r.updated_at).name


def existing_run(ws: Workspace, store: Store | None, name: str) -> tuple[Store, Run]:
    """The store and its run called ``name``.

    Raises:
        BadRequest: the workspace has no store, or no run of that name.
    """
    run = store.get_run(name) if store is not None else None
    if store is None or run is None:
        raise BadRequest(f"No run named {name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    return store, run
