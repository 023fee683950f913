"""Approving a run's gates: which gate a run is at (``engine.gates`` decides), what it is called, what to read.

A gate is the plan (``plan.md``), then the captions the prepare phase wrote (the run's ``dataset.json``).
``approve`` approves the gate the run is at, by its subject (a content hash): editing what it approves
makes a new subject, which needs a new approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.engine import approve_plan
from ltx_pipeline.engine.gates import current_gate
from ltx_pipeline.store import Run, Store, saved_id
from ltx_pipeline.workspace import Workspace

__all__ = ["Approval", "Gate", "approve", "gate_of"]

_CAPTIONS_PHASE = "prepare"  # the phase whose result is the captions gate; every other gate is the plan's


@dataclass(frozen=True)
class Gate:
    """An approval gate of a run: the phase that yielded it, its subject, what blocks it, the file to read."""

    phase: str | None
    subject: str
    review: Path  # what the user reads before approving: plan.md, or the prepared dataset.json
    blockers: tuple[str, ...] = ()

    @property
    def captions(self) -> bool:
        """Whether this gate approves the prepared captions (else the plan)."""
        return self.phase == _CAPTIONS_PHASE

    @property
    def name(self) -> str:
        """What the gate approves, in a word: ``Plan`` or ``Captions``."""
        return "Captions" if self.captions else "Plan"


@dataclass(frozen=True)
class Approval:
    """One gate approved (``new``), or found approved already (not ``new``)."""

    run: str
    gate: Gate
    new: bool


def gate_of(ws: Workspace, run: str, phase: str | None, subject: str, blockers: list[str] | None = None) -> Gate:
    """The gate ``phase`` yielded for run ``run``, with the file its user reads."""
    paths = ws.run(run)
    review = paths.dataset / "dataset.json" if phase == _CAPTIONS_PHASE else paths.plan_file
    return Gate(phase, subject, review, tuple(blockers or ()))


def approve(ws: Workspace, store: Store, run: Run, approved_by: str) -> Approval:
    """Approve the gate the run is at (``engine.gates.current_gate``).

    Raises:
        ApprovalRefused: no plan yet, the plan is out of date, or prerequisites are missing.
    """
    at = current_gate(store, saved_id(run))  # the gate ``approve_plan`` approves
    subject, new = approve_plan(store, run, approved_by=approved_by)
    phase = at.phase if at is not None and at.approval_subject == subject else None
    return Approval(run.name, gate_of(ws, run.name, phase, subject), new)
