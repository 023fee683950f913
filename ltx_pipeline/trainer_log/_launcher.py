"""Launcher prefixes: what ``accelerate launch``/torchrun put before each line of a multi-process log.

torch.distributed prints every line of a rank's traceback as ``[rank1]: ...`` (``[rank1]:[W ...]`` for
its own warnings), torchrun's ``--tee``/``--log-dir`` streams as ``[default0]:``. They are stripped before
anything else reads the line, and the rank kept, so a failure on one rank is reported with its rank.
torchrun's closing ``ChildFailedError`` block names the failed rank as ``rank : 1 (local_rank: 1)``.
Pure standard library.
"""

from __future__ import annotations

import re

__all__ = ["failed_rank_from_summary", "strip_launcher_prefixes"]

_PREFIX_RE = re.compile(r"^\[(?:rank|default)\s?(\d+)\]:[ ]?")
_CHILD_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)")


def strip_launcher_prefixes(lines: list[str]) -> tuple[list[str], list[int | None]]:
    """The lines without their launcher prefix, and each line's rank (None: no prefix)."""
    stripped: list[str] = []
    ranks: list[int | None] = []
    for line in lines:
        match = _PREFIX_RE.match(line)
        if match:
            stripped.append(line[match.end():])
            ranks.append(int(match.group(1)))
        else:
            stripped.append(line)
            ranks.append(None)
    return stripped, ranks


def failed_rank_from_summary(lines: list[str]) -> int | None:
    """The rank torchrun's ``ChildFailedError`` summary names as its root cause (else its first failure)."""
    root = next((i for i, line in enumerate(lines) if "Root Cause" in line), 0)
    for line in lines[root:] + lines[:root]:
        match = _CHILD_RANK_RE.match(line)
        if match:
            return int(match.group(1))
    return None
