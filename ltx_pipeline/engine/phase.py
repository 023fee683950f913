"""The ``Phase`` protocol every phase module satisfies, and ``PhaseResult``.

A phase is a name, whether it is heavy (needs an approved plan), how it fingerprints its real
inputs, ``run(ctx)`` and a one-line summary of what came out. Phases know nothing of persistence:
they read the request and upstream outputs from the context and return JSON-able outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ltx_pipeline.engine.context import RunContext

__all__ = ["Phase", "PhaseResult"]


@dataclass(frozen=True)
class PhaseResult:
    """What a phase produced.

    Attributes:
        outputs: JSON-able data later phases read through ``ctx.output(name)``.
        approval_subject: set by a phase that produces something the user must approve (the plan):
            a content digest; no later phase runs until that exact digest is approved.
        approval_blockers: reasons approval must be refused for now (missing prerequisites).
        pending: the phase handed work to a process that goes on without the engine (a detached
            training): the drive stops here, and the next ``resume`` re-enters the phase to re-attach.
    """

    outputs: dict[str, Any]
    approval_subject: str | None = None
    approval_blockers: list[str] = field(default_factory=list)
    pending: bool = False


@runtime_checkable
class Phase(Protocol):
    """One step of the workflow."""

    name: str
    heavy: bool

    def fingerprint(self, ctx: RunContext) -> dict[str, Any]:
        """The parts of the real inputs this phase reads (request slices, file digests)."""
        ...

    def run(self, ctx: RunContext) -> PhaseResult:
        """Do the work; idempotent, since an interrupted attempt is re-run from scratch."""
        ...

    def summary(self, outputs: dict[str, Any]) -> str:
        """One line on what came out."""
        ...
