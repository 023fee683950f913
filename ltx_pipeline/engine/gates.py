"""Which approval gate a run is at: the one rule that ``approve`` and ``status`` share.

A phase whose result carries an approval subject is a gate (the plan, then the prepared captions). The
current gate is the earliest-run latest attempt whose subject is not approved yet, else the newest one.
Run order is phase order here: a later gate only runs once every earlier subject is approved, and an
earlier phase that re-runs gets a newer row, so "earliest unapproved" is always the one the drive stops at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the reader and the full store answer the same queries
    from ltx_pipeline.store import PhaseRun, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["current_gate"]


def current_gate(store: Store | StoreReader, run_id: int) -> PhaseRun | Record | None:
    """The latest attempt of the gate the run is at, or None before any phase yielded a subject."""
    gates = sorted((r for r in store.latest_phase_runs(run_id).values() if r.approval_subject),
                   key=lambda r: r.id or 0)
    waiting = (r for r in gates if store.approval_for(run_id, r.approval_subject or "") is None)
    return next(waiting, gates[-1] if gates else None)
