"""Launcher prefixes: what ``accelerate launch``/torchrun put before each line of a multi-process log.

torch.distributed prints every line of a rank's traceback as ``[rank1]: ...`` (``[rank1]:[W ...]`` for
its own warnings), torchrun's ``--tee``/``--log-dir`` streams as ``[default0]:``. They are stripped before
anything else reads the line, and the rank kept, so a failure on one rank is reported with its rank.
torchrun's closing ``ChildFailedError`` block names the failed rank as ``rank : 1 (local_rank: 1)``.
SLURM's ``srun --label`` puts the task number first (``0: Traceback ...``): it is a rank as well. Front ends that
run a trainer as a subprocess tag its lines too (``[sd-scripts] ``, ``Training STDERR: ``, ``[08:03:35] [STDERR] ``,
``[MusubiTuner WanLoRATrainer] TRAINER: ``): those are stripped and carry no rank.

Logs pasted into an issue carry more: the header each logging setup puts first (a date and time, a level in
brackets or before a colon, a logger name, DeepSpeed's ``[launch.py:325:sigkill_handler]``, loguru's
``| ERROR    | module:func:12 - ``, docker compose's ``service-1  | ``), ANSI colour codes, progress bars redrawn
with carriage returns, and markdown (code fences, ``> `` quotes, ``**bold**`` and backticks around a line).
Each is a shape, not a phrase: removed generally, so the message itself is what the classifier reads; a header's
error level is kept apart (``error_records``: the records a program logs its refusals in). Rich's own
``ERROR    message   file.py:12`` layout is left for ``_grammar``. Pure standard library.
"""

from __future__ import annotations

import re

__all__ = ["error_records", "failed_rank_from_summary", "strip_launcher_prefixes"]

# The bracket may be lost in a paste ("rank0]: ..." at the start of a copied selection).
_PREFIX_RE = re.compile(r"^\[?(?:rank|default)\s?(\d+)\]:[ ]?")
_SLURM_LABEL_RE = re.compile(r"^(\d{1,5}): ")
# A front end's tag: a bracketed name or clock time, or a "<name> STDERR:"/"TRAINER:" label. A bracketed tag starts
# with a letter and holds no ":", "=" or "," (torch's "[W1106 10:18:14.6 ...cpp:1524]" and Python lists are no
# tags); a line that is nothing but a tag is kept as it is.
_TOOL_PREFIX_RE = re.compile(r"^(?:\[(?:[A-Za-z][\w .\-]{0,40}|\d{2}:\d{2}:\d{2})\] ?|"
                             r"(?:\w+ )?(?:STDERR|STDOUT|TRAINER): ?)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A logging header: date/time, level, logger name or source location, in the orders logging setups use.
_CLOCK = r"\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
_STAMP = rf"\d{{4}}[-/]\d{{2}}[-/]\d{{2}}[ T]{_CLOCK}(?:Z|[+-]\d{{2}}:?\d{{2}})?"
_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_CLOCK_ONLY = r"\d{2}:\d{2}:\d{2}(?:[.,-]\d{3,6})?"
_HEADER_RE = re.compile(
    rf"^(?:\[{_STAMP}\]|{_STAMP}|\[{_CLOCK}\])\s*(?:\|\s*|-\s+)?"  # a date and time (bracketed or not)
    rf"|^{_CLOCK_ONLY}\s+(?={_LEVEL}\b)"  # a bare clock before the level column: kohya_ss GUI's "09:55:45-587320 "
    rf"|^\[{_LEVEL}\]\s*"  # [ERROR]
    rf"|^{_LEVEL}:(?:[\w.<>\-]+:)?\s?(?=\S)"  # Python logging's default "ERROR:name.space:"
    rf"|^{_LEVEL}\s*\|\s*(?:[\w.<>\-]+:[\w.<>\-]+:\d+\s+-\s+)?"  # loguru's "ERROR    | mod:func:12 - "
    r"|^\([\w.<>\-]+\)\s+"  # a logger name in parentheses after the level: "(__main__) "
    r"|^\[[\w.\-]+\.py:\d+(?::\w+)?\]\s*"  # a source location: "[launch.py:325:sigkill_handler]"
    r"|^[\w.\-]+-\d+\s+\|\s"  # docker compose: "trainer-1  | "
)
_ERROR_LEVEL_RE = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
_FENCE_RE = re.compile(r"^\s*(?:```|~~~)[\w+\-]*\s*$")
_QUOTE_RE = re.compile(r"^(?:>\s?)+")
_WRAPPED_RE = re.compile(r"^(\*\*|__|`)(?P<text>.+?)\1(?P<rest>[.:]?)$")
# Not "**kwargs": a pair around text; not a run of three (SLURM's "*** JOB 1 ... CANCELLED AT ... ***").
_BOLD_RE = re.compile(r"(?<!\*)\*\*(?!\*)(\S(?:[^*]*\S)?)\*\*(?!\*)")
_CHILD_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)")


def strip_launcher_prefixes(lines: list[str]) -> tuple[list[str], list[int | None]]:
    """The lines without their launcher prefix, and each line's rank (None: no prefix)."""
    stripped: list[str] = []
    ranks: list[int | None] = []
    for line in lines:
        text, rank, _ = _stripped(line)
        stripped.append(text)
        ranks.append(rank)
    return stripped, ranks


def error_records(lines: list[str]) -> list[str]:
    """The messages of the lines whose logging header carries an error level (``[ERROR]``, ``ERROR:name:``,
    loguru's ``| ERROR |``, ``CRITICAL``), in order: the records a program logs its refusals and caught exceptions
    in. Rich's level column (``ERROR    message   file.py:12``) is ``_grammar``'s."""
    return [text.strip() for line in lines if (record := _stripped(line))[2] and (text := record[0]).strip()]


def _stripped(line: str) -> tuple[str, int | None, bool]:
    """One line without its prefixes, its rank (None: no prefix), and whether a header stripped named an error."""
    rank: int | None = None
    error = False
    line = _unformatted(line)
    for _ in range(6):  # prefixes nest: "0: [rank0]: ...", "[08:03:35] [STDERR] ...", "<stamp> [ERROR] ..."
        if match := _PREFIX_RE.match(line) or _SLURM_LABEL_RE.match(line):
            rank = int(match.group(1)) if rank is None else rank
        elif not (match := _TOOL_PREFIX_RE.match(line) or _HEADER_RE.match(line)) or not line[match.end():].strip():
            break
        else:
            error = error or bool(_ERROR_LEVEL_RE.search(match.group(0)))
        line = line[match.end():]
    return _unwrapped(line), rank, error


def _unformatted(line: str) -> str:
    """The line as a terminal showed it last, outside markdown: no ANSI codes, redraws, fences or quote marks."""
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    if "\r" in line.rstrip("\r"):  # a progress bar redrawn: the last state is what was visible
        line = next((part for part in reversed(line.split("\r")) if part.strip()), "")
    if _FENCE_RE.match(line):
        return ""
    return _QUOTE_RE.sub("", line) if line.startswith(">") else line


def _unwrapped(line: str) -> str:
    """A message set in bold or code markup, without the markup (``**ValueError: x**`` -> ``ValueError: x``)."""
    stripped = line.strip()
    if match := _WRAPPED_RE.match(stripped):
        return match.group("text").strip() + match.group("rest")
    return _BOLD_RE.sub(r"\1", line) if "**" in line else line


def failed_rank_from_summary(lines: list[str]) -> int | None:
    """The rank torchrun's ``ChildFailedError`` summary names as its root cause (else its first failure)."""
    root = next((i for i, line in enumerate(lines) if "Root Cause" in line), 0)
    for line in lines[root:] + lines[:root]:
        match = _CHILD_RANK_RE.match(line)
        if match:
            return int(match.group(1))
    return None
