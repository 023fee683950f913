"""``RunRecords``: one run's stored rows as the comparison reads them: typed outputs on demand, and why one is
missing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ltx_pipeline.engine.outputs import PhaseOutputs
from ltx_pipeline.errors import BadInput

if TYPE_CHECKING:
    from ltx_pipeline.store import PhaseRun, Run, Store
    from ltx_pipeline.store.reader import Record, StoreReader

__all__ = ["RunRecords"]

_Outputs = TypeVar("_Outputs", bound=PhaseOutputs)
_HAS_RESULT = ("succeeded", "detached")


@dataclass
class RunRecords:
    """One run's row, its latest phase rows and its folder; typed outputs are read on demand."""

    store: Store | StoreReader
    run: Run | Record
    root: Path
    latest: dict[str, PhaseRun | Record]
    notes: list[str] = field(default_factory=list)

    def typed(self, phase: str, kind: type[_Outputs]) -> _Outputs | None:
        """The phase's stored outputs as ``kind``; None when it has none (a note says why it could not be read)."""
        row = self.latest.get(phase)
        if row is None or row.status not in _HAS_RESULT or not isinstance(row.outputs, dict):
            return None
        try:
            return kind.from_stored(row.outputs, row.outputs_version)
        except BadInput as exc:
            self.notes.append(exc.line())
            return None

    def why(self, phase: str) -> str:
        """Why ``phase`` gives no figure: it never ran, has not finished, or its outputs are unreadable."""
        row = self.latest.get(phase)
        if row is None:
            return f"the {phase} phase has not run (run state: {self.run.state})"
        if row.status not in _HAS_RESULT:
            return f"the {phase} phase has not finished (attempt {row.attempt}: {row.status})"
        if not any(phase in note for note in self.notes):
            return f"the {phase} phase stored no such figure (the run is {self.run.state})"
        return f"the {phase} phase's stored outputs cannot be read by this version"
