"""plan.md's sections written outside the approved text (the latent cache's forecast, the holdout loss's cost).

A section is its ``## `` heading and every line up to the next ``## `` heading. These put one in place (or
before a given heading, or at the end), take it out again, and write a plan.md with it, atomically.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.workspace import atomic_write

__all__ = ["with_section_before", "without_section", "write_section_before"]


def without_section(text: str, heading: str) -> str:
    """``text`` without the section under ``heading`` (how the plan reads apart from it)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if line == heading:
            skipping = True
            continue
        if skipping and line.startswith("## "):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def with_section_before(text: str, heading: str, section: list[str], before: str) -> str:
    """``text`` with ``section`` in place of its ``heading`` section, else before the line ``before`` (else last)."""
    lines = without_section(text, heading).splitlines()
    at = next((i for i, line in enumerate(lines) if line == before), len(lines))
    block = list(section)
    if at == len(lines) and lines and lines[-1].strip():
        block = ["", *block]
    return "\n".join([*lines[:at], *block, *lines[at:]]).rstrip("\n") + "\n"


def write_section_before(plan_file: Path, heading: str, section: list[str], before: str, *, root: Path) -> bool:
    """Put ``section`` into the plan.md at ``plan_file`` (written atomically); False when there is none."""
    try:
        text = plan_file.read_text(encoding="utf-8")
    except OSError:
        return False
    atomic_write(plan_file, with_section_before(text, heading, section, before), root=root)
    return True
