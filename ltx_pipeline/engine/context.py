"""``RunContext``: what a phase may see while it runs.

It carries the request, the run's paths, the stored outputs of upstream phases (read as their
typed, frozen models: ``ctx.output(PlanOutputs)``), the chosen trainer backend and a ``narrate``
channel. It never exposes a DB session: phases share data only through stored outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from ltx_pipeline.engine.fingerprint import digest
from ltx_pipeline.engine.options import RunOptions
from ltx_pipeline.engine.outputs import PhaseOutputs, StoredOutputs
from ltx_pipeline.engine.reporting import Reporter, SilentReporter
from ltx_pipeline.workspace import RunPaths

if TYPE_CHECKING:
    from ltx_pipeline.engine.journal import RunJournal

__all__ = ["RunContext"]

Narrator = Callable[[str, str], None]
OutputsT = TypeVar("OutputsT", bound=PhaseOutputs)
# The engine knows neither the LTX request nor the trainer backends: the context is generic over both, and
# phases name the concrete pair (``phase_context.LtxContext``: ``RunContext[RunRequest, TrainerBackend]``).
RequestT = TypeVar("RequestT")
BackendT = TypeVar("BackendT")


@dataclass
class RunContext(Generic[RequestT, BackendT]):
    """The view of a run a phase gets."""

    run_name: str
    workspace: Path
    paths: RunPaths
    request: RequestT
    upstream: Mapping[str, StoredOutputs]
    backend: BackendT
    journal: RunJournal  # the records this phase may write (processes, metrics, checkpoints)
    approved: bool = False
    _narrator: Narrator | None = None
    phase: str = ""
    options: RunOptions = field(default_factory=RunOptions)  # this invocation's flags (detach, apply_fix...)
    reporter: Reporter = field(default_factory=SilentReporter)  # the progress display, never the record

    def output(self, phase: type[OutputsT]) -> OutputsT:
        """The outputs of an upstream phase that has succeeded, as its typed, frozen model.

        Raises:
            KeyError: that phase has no outputs in this drive (it is not upstream, or is absent).
        """
        if phase.PHASE not in self.upstream:
            raise KeyError(f"phase {phase.PHASE!r} has no stored outputs for run {self.run_name}")
        return self.upstream[phase.PHASE].typed(phase)

    def has_output(self, phase: str) -> bool:
        """Whether an upstream phase has stored outputs in this drive (optional phases may be absent)."""
        return phase in self.upstream

    def output_digest(self, phase: str) -> str:
        """A digest of an upstream phase's outputs as stored: a fingerprint part that changes when they do."""
        return digest(self.upstream[phase].data)

    def narrate(self, message: str) -> None:
        """Tell the user, in plain words, what is happening; recorded as an event."""
        if self._narrator:
            self._narrator(message, "info")

    def warn(self, message: str) -> None:
        """A warning the user should read; recorded as an event and shown by ``status``."""
        if self._narrator:
            self._narrator(message, "warning")
