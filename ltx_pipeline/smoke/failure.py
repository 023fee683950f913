"""The smoke test's one failure type: which step, the evidence, the fix, and the log that holds it."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SmokeFailed"]


class SmokeFailed(Exception):
    """A step failed: which, the evidence (the trainer's own line where there is one), the fix and the log."""

    def __init__(self, step: str, diagnosis: str, fix: str, log: Path | None = None) -> None:
        super().__init__(f"{step}: {diagnosis}")
        self.step, self.diagnosis, self.fix, self.log = step, diagnosis, fix, log
