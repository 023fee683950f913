"""The ``Phase`` protocol every phase module satisfies, and ``PhaseResult``.

A phase is a name, whether it is heavy (needs an approved plan), how it fingerprints its real
inputs, ``run(ctx)`` and a one-line summary of what came out. Phases know nothing of persistence:
they read the request and upstream outputs from the context and return JSON-able outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from ltx_pipeline.engine.outputs import PhaseOutputs

if TYPE_CHECKING:
    from ltx_pipeline.engine.context import RunContext

__all__ = ["Phase", "PhaseResult"]


OutputsT = TypeVar("OutputsT", bound=PhaseOutputs)


@dataclass(frozen=True)
class PhaseResult(Generic[OutputsT]):
    """What a phase produced.

    Attributes:
        outputs: JSON-able data later phases read through ``ctx.output(name)``.
        approval_subject: set by a phase that produces something the user must approve (the plan):
            a content digest; no later phase runs until that exact digest is approved.
        approval_blockers: reasons approval must be refused for now (missing prerequisites).
        pending: the phase handed work to a process that goes on without the engine (a detached
            training): the drive stops here, and the next ``resume`` re-enters the phase to re-attach.
    """

    outputs: OutputsT
    approval_subject: str | None = None
    approval_blockers: list[str] = field(default_factory=list)
    pending: bool = False


@runtime_checkable
class Phase(Protocol[OutputsT]):
    """One step of the workflow, producing one typed outputs model (``outputs_type``).

    A phase may also set ``optional_extra = True`` (read with ``getattr``): new work a finished run does not owe,
    so a run that finished before a release added the phase is not made to run it (``resume --replan`` does).
    """

    name: str
    heavy: bool
    outputs_type: type[OutputsT]  # what ``run`` returns and later phases read with ``ctx.output(...)``

    def fingerprint(self, ctx: RunContext[Any, Any]) -> dict[str, Any]:
        """The parts of the real inputs this phase reads (request slices, file digests)."""
        ...

    def run(self, ctx: RunContext[Any, Any]) -> PhaseResult[OutputsT]:
        """Do the work; idempotent, since an interrupted attempt is re-run from scratch."""
        ...

    def summary(self, outputs: OutputsT) -> str:
        """One line on what came out."""
        ...
