"""``RunContext``: what a phase may see while it runs.

It carries the request, the run's paths, the stored outputs of upstream phases (read-only
copies), the chosen trainer backend and a ``narrate`` channel. It never exposes a DB session:
phases share data only through stored outputs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.workspace import RunPaths

__all__ = ["RunContext"]

Narrator = Callable[[str, str], None]


@dataclass
class RunContext:
    """The view of a run a phase gets."""

    run_name: str
    workspace: Path
    paths: RunPaths
    request: Any
    upstream: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    backend: Any = None
    approved: bool = False
    _narrator: Narrator | None = None
    phase: str = ""
    journal: Any = None  # RunJournal: the records this phase may write (processes, metrics, checkpoints)
    options: Mapping[str, Any] = field(default_factory=dict)  # per-invocation choices (detach, apply_fix...)

    def output(self, phase: str) -> dict[str, Any]:
        """A deep copy of the stored outputs of an upstream phase that has succeeded."""
        if phase not in self.upstream:
            raise KeyError(f"phase {phase!r} has no stored outputs for run {self.run_name}")
        return copy.deepcopy(self.upstream[phase])

    def narrate(self, message: str) -> None:
        """Tell the user, in plain words, what is happening; recorded as an event."""
        if self._narrator:
            self._narrator(message, "info")

    def warn(self, message: str) -> None:
        """A warning the user should read; recorded as an event and shown by ``status``."""
        if self._narrator:
            self._narrator(message, "warning")
