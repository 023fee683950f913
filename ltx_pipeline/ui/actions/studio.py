"""What every studio action gets and gives: the server's settings, the attempt it fills, the result.

``Studio`` is fixed when the server starts: the workspace, the ``--data-root`` folders (resolved), the
name the audit records as "who", and the launcher of detached commands. An action fills ``Attempt`` (the
run it concerns, the CLI command it runs) as soon as it knows them, so a refused action is audited with
what it would have run; it returns ``Done`` or raises the project's errors (``errors.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import Refused
from ltx_pipeline.ui.actions.detached import Launcher
from ltx_pipeline.workspace import Workspace

__all__ = ["Attempt", "Conflict", "Done", "Studio"]


@dataclass(frozen=True)
class Studio:
    """The server's settings every write action reads."""

    workspace: Workspace
    data_roots: tuple[Path, ...]
    who: str  # the audit's "who": --token-name, "token", or "loopback"
    launcher: Launcher = field(default_factory=Launcher)

    @property
    def root(self) -> str:
        return str(self.workspace.root)


@dataclass
class Attempt:
    """What an action concerns, filled as it goes: the audit row of a refusal names them too."""

    action: str
    run: str | None = None
    command: str = ""


@dataclass(frozen=True)
class Done:
    """An accepted action: the command it ran, a sentence for the page, and extra fields for the JSON."""

    run: str | None
    command: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


class Conflict(Refused):
    """The page acted on a state that has changed since it was drawn (a stale gate, a run at work): HTTP 409."""
