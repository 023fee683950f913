"""Reading the runs to compare and building the ``Comparison``: read-only, no lock, like ``status``.

A run's stored outputs are read as their typed models (``ltx_pipeline.outputs``); outputs a phase has not
stored yet (or that this version cannot read) make the figures that need them "-", with why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltx_pipeline.compare.config import config_differences, prompt_renders, request_choices
from ltx_pipeline.compare.figures import run_figures
from ltx_pipeline.compare.records import Comparison
from ltx_pipeline.compare.run_records import RunRecords
from ltx_pipeline.errors import BadRequest
from ltx_pipeline.store.rows import saved_id
from ltx_pipeline.workspace import Workspace, validate_run_name

if TYPE_CHECKING:
    from ltx_pipeline.store import Store
    from ltx_pipeline.store.reader import StoreReader

__all__ = ["compare_runs"]


def compare_runs(store: Store | StoreReader | None, workspace: Workspace, names: list[str]) -> Comparison:
    """The runs ``names`` of ``workspace`` compared, in the order given.

    Raises:
        BadRequest: fewer than two runs, a run named twice, or a name the workspace has no run of.
        UnsafePath: a name that is not a run name.
    """
    _check_names(names)
    found = [_records(store, workspace, name) for name in names]
    return Comparison(
        workspace=str(workspace.root),
        runs=tuple(run_figures(r, workspace.run(r.run.name).outputs) for r in found),
        patches=config_differences(found), request=request_choices(found), renders=prompt_renders(found))


def _check_names(names: list[str]) -> None:
    for name in names:
        validate_run_name(name)
    if len(names) < 2:
        raise BadRequest(f"compare needs two runs or more; got {len(names)} ({', '.join(names) or 'none'})",
                         where="compare RUN RUN", fix="name two or more runs; `ltx-pipeline status` lists them")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise BadRequest(f"run {twice[0]!r} is named twice", where="compare RUN RUN",
                         fix="name each run once")


def _records(store: Store | StoreReader | None, workspace: Workspace, name: str) -> RunRecords:
    run = store.get_run(name) if store is not None else None
    if store is None or run is None:
        raise BadRequest(f"No run named {name!r} in {workspace.root}", where="compare RUN",
                         fix=f"`ltx-pipeline status --workspace {workspace.root}` lists its runs")
    return RunRecords(store, run, workspace.run(name).root, dict(store.latest_phase_runs(saved_id(run))))
