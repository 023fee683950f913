"""Stopping a run's work: its trainer (or, between trainings, its evaluation render), whoever drives it.

``stop_target`` finds the run and what of it is alive; ``stop`` marks the process as stopped by the user,
then sends SIGINT to the trainer's process group, SIGTERM and SIGKILL after timeouts (a SLURM job:
scancel), and records what happened. A follower that sees the end reads the mark and records a stop,
not a failure. A trainer that exits 0 while the stop was on its way ended on its own, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ltx_pipeline.engine.journal import ProcessHandle, RunJournal
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.store import Store, saved_id
from ltx_pipeline.training.follow import request_stop
from ltx_pipeline.workspace import Workspace

__all__ = ["StopTarget", "Stopped", "stop", "stop_target"]


@dataclass(frozen=True)
class StopTarget:
    """What of a run is alive to stop: its trainer, its evaluation render, or nothing."""

    run: str
    workspace: Path
    kind: Literal["training", "render", "nothing"]
    handle: ProcessHandle | None
    journal: RunJournal


@dataclass(frozen=True)
class Stopped:
    """How a stop went: ``how`` the process ended (signal or scancel), or that it ``ended_on_its_own`` (exit 0)."""

    target: StopTarget
    how: str | None
    ended_on_its_own: bool = False


def stop_target(workspace: Path | None, run_name: str | None) -> StopTarget:
    """The run (the one updated last when ``run_name`` is None) and its live trainer or render.

    Raises:
        BadRequest: no workspace database, no runs, or no run of that name.
    """
    ws = Workspace.at(workspace)
    if not ws.has_store():
        raise BadRequest(f"No workspace database in {ws.root}", where="--workspace", fix="pass the run's workspace")
    store = Store.open(ws.store)
    run = store.get_run(run_name) if run_name else max(store.list_runs(), key=lambda r: r.updated_at, default=None)
    if run is None and run_name is None:
        raise BadRequest("This workspace has no runs", where=f"--workspace {ws.root}",
                         fix="start one with `ltx-pipeline run`")
    if run is None:
        raise BadRequest(f"No run named {run_name!r} in {ws.root}", where="--run", fix="see `ltx-pipeline status`")
    journal = RunJournal(store, saved_id(run), "train")
    handle = journal.live("train")
    if handle is not None:
        return StopTarget(run.name, ws.root, "training", handle, journal)
    render = journal.live("evaluate")
    return StopTarget(run.name, ws.root, "nothing" if render is None else "render", render, journal)


def stop(target: StopTarget, *, interrupt_timeout: float, terminate_timeout: float) -> Stopped:
    """Stop what ``target`` found alive (nothing: nothing to do), and record it in the run's events."""
    handle, journal = target.handle, target.journal
    if handle is None:
        return Stopped(target, None)
    if target.kind == "render":
        how = journal.stop(handle, interrupt_timeout=interrupt_timeout, terminate_timeout=terminate_timeout)
        journal.event("evaluation render stopped by the user", level="warning")
        return Stopped(target, how)
    request_stop(handle, target.workspace)
    how = journal.stop(handle, interrupt_timeout=interrupt_timeout, terminate_timeout=terminate_timeout)
    if (handle.exit() or {}).get("exit_code") == 0:
        # It ended by itself while the signal was on its way (or the trainer ignored it).
        journal.event(f"training stage {handle.stage} exited 0 while a stop was asked for", level="warning")
        return Stopped(target, how, ended_on_its_own=True)
    journal.event(f"training stage {handle.stage} stopped by the user ({how})", level="warning")
    return Stopped(target, how)
