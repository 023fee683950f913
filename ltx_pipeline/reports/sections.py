"""plan.md's sections written outside the approved text (the latent cache's forecast, the holdout loss's cost).

A section is its ``## `` heading and every line up to the next ``## `` heading. A ``PlanSection`` puts one in
place (or before a given heading, or at the end), takes it out again, and writes a plan.md with it, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.ltx.plan_provenance import without_section
from ltx_pipeline.workspace import atomic_write

__all__ = ["PlanSection"]


@dataclass(frozen=True)
class PlanSection:
    """The section under ``heading``, placed before the line ``before`` when plan.md has none yet (else last)."""

    heading: str
    before: str

    def drop(self, text: str) -> str:
        """``text`` without this section (how the plan reads apart from it)."""
        return "\n".join(without_section(text.splitlines(), self.heading)) + ("\n" if text.endswith("\n") else "")

    def put(self, text: str, section: list[str]) -> str:
        """``text`` with ``section`` in place of this one, else before ``before`` (else last)."""
        lines = self.drop(text).splitlines()
        at = next((i for i, line in enumerate(lines) if line == self.before), len(lines))
        block = list(section)
        if at == len(lines) and lines and lines[-1].strip():
            block = ["", *block]
        return "\n".join([*lines[:at], *block, *lines[at:]]).rstrip("\n") + "\n"

    def write(self, plan_file: Path, section: list[str], *, root: Path) -> bool:
        """Put ``section`` into the plan.md at ``plan_file`` (written atomically); False when there is none."""
        try:
            text = plan_file.read_text(encoding="utf-8")
        except OSError:
            return False
        atomic_write(plan_file, self.put(text, section), root=root)
        return True
