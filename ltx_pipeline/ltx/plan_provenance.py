"""Which version wrote a plan.md, and what a plan re-written by another version changed (#49).

plan.md names the ltx-pipeline that wrote it and the digest you approve (the plan's text without these lines,
so a version's own identity never voids an approval). Re-written by another version, it lists the lines that now
read differently and says whether the approval stands. Pure: the phase reads the previous file.
"""

from __future__ import annotations

import difflib
import re

__all__ = ["with_provenance", "without_section", "written_by"]

_HEADER = re.compile(r"^_Written by (?P<writer>.+?)\. You approve this plan \(`(?P<subject>[^`]+)`\)")
_MAX_LINES = 20


def written_by(text: str) -> tuple[str, str] | None:
    """(writer, the digest approved) from a plan.md's provenance line; None for a plan written before it."""
    for line in text.splitlines()[:6]:
        if match := _HEADER.match(line):
            return match["writer"], match["subject"]
    return None


def with_provenance(text: str, subject: str, writer: str, previous: str | None) -> str:
    """``text`` (a plan.md) with its provenance line under the title and, where another version wrote the previous
    plan.md and it read otherwise, a "Since the last plan" section naming the lines that differ and why."""
    title, _, body = text.partition("\n")
    line = f"_Written by {writer}. You approve this plan (`{subject[:19]}…`), these lines aside._"
    section = _since_last(body, subject, writer, previous) if previous is not None else []
    return "\n".join([title, "", line, *section, body.lstrip("\n") if section else body]).rstrip("\n") + "\n"


def _since_last(body: str, subject: str, writer: str, previous: str) -> list[str]:
    """The section, for a plan another version wrote before (a re-plan by the same version needs none: status says
    why it ran, and the digest says whether its text changed)."""
    old = written_by(previous)
    old_writer, old_subject = old if old is not None else ("an earlier ltx-pipeline (it did not name itself)", "")
    if old_writer == writer:
        return []
    _, _, old_body = previous.partition("\n")
    old_lines = [ln for ln in old_body.splitlines() if not _HEADER.match(ln)]
    old_lines = without_section(old_lines, "## Since the last plan")  # that plan's own predecessor
    new_lines = body.splitlines()
    changed = [ln for ln in difflib.unified_diff(old_lines, new_lines, lineterm="", n=0)
               if ln[:1] in "+-" and not ln.startswith(("+++", "---")) and ln[1:].strip()]
    if not changed:
        return []
    why = f"the last plan.md was written by {old_writer}, this one by {writer}"
    if old_subject and old_subject[:19] == subject[:19]:
        verdict = "the plan you approved reads the same, so the approval stands"
    else:
        verdict = "it reads otherwise, so it needs your approval again (`ltx-pipeline status` shows the command)"
    shown = changed[:_MAX_LINES]
    more = [f"- and {len(changed) - _MAX_LINES} more line(s)"] if len(changed) > _MAX_LINES else []
    return ["", "## Since the last plan", "", f"- Why: {why}; {verdict}.",
            "- Lines that differ (`-` the last plan, `+` this one):", "",
            *(f"    {ln}" for ln in shown), *more, ""]


def without_section(lines: list[str], heading: str) -> list[str]:
    """``lines`` of a plan.md without the section under ``heading``: that line up to the next ``## `` heading."""
    out: list[str] = []
    skipping = False
    for line in lines:
        if line == heading:
            skipping = True
            continue
        if skipping and line.startswith("## "):
            skipping = False
        if not skipping:
            out.append(line)
    return out
