"""Launcher prefixes: what ``accelerate launch``/torchrun put before each line of a multi-process log.

torch.distributed prints every line of a rank's traceback as ``[rank1]: ...`` (``[rank1]:[W ...]`` for
its own warnings), torchrun's ``--tee``/``--log-dir`` streams as ``[default0]:``. They are stripped before
anything else reads the line, and the rank kept, so a failure on one rank is reported with its rank.
torchrun's closing ``ChildFailedError`` block names the failed rank as ``rank : 1 (local_rank: 1)``.
SLURM's ``srun --label`` puts the task number first (``0: Traceback ...``): it is a rank as well. Front ends that
run a trainer as a subprocess tag its lines too (``[sd-scripts] ``, ``Training STDERR: ``, ``[08:03:35] [STDERR] ``,
``[MusubiTuner WanLoRATrainer] TRAINER: ``): those are stripped and carry no rank. Pure standard library.
"""

from __future__ import annotations

import re

__all__ = ["failed_rank_from_summary", "strip_launcher_prefixes"]

_PREFIX_RE = re.compile(r"^\[(?:rank|default)\s?(\d+)\]:[ ]?")
_SLURM_LABEL_RE = re.compile(r"^(\d{1,5}): ")
# A front end's tag: a bracketed name or clock time, or a "<name> STDERR:"/"TRAINER:" label. A bracketed tag starts
# with a letter and holds no ":", "=" or "," (torch's "[W1106 10:18:14.6 ...cpp:1524]" and Python lists are no
# tags); a line that is nothing but a tag is kept as it is.
_TOOL_PREFIX_RE = re.compile(r"^(?:\[(?:[A-Za-z][\w .\-]{0,40}|\d{2}:\d{2}:\d{2})\] ?|"
                             r"(?:\w+ )?(?:STDERR|STDOUT|TRAINER): ?)")
_CHILD_RANK_RE = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)")


def strip_launcher_prefixes(lines: list[str]) -> tuple[list[str], list[int | None]]:
    """The lines without their launcher prefix, and each line's rank (None: no prefix)."""
    stripped: list[str] = []
    ranks: list[int | None] = []
    for line in lines:
        rank: int | None = None
        for _ in range(4):  # prefixes nest: "0: [rank0]: ...", "[08:03:35] [STDERR] ..."
            if match := _PREFIX_RE.match(line) or _SLURM_LABEL_RE.match(line):
                rank = int(match.group(1)) if rank is None else rank
            elif not (match := _TOOL_PREFIX_RE.match(line)) or not line[match.end():].strip():
                break
            line = line[match.end():]
        stripped.append(line)
        ranks.append(rank)
    return stripped, ranks


def failed_rank_from_summary(lines: list[str]) -> int | None:
    """The rank torchrun's ``ChildFailedError`` summary names as its root cause (else its first failure)."""
    root = next((i for i, line in enumerate(lines) if "Root Cause" in line), 0)
    for line in lines[root:] + lines[:root]:
        match = _CHILD_RANK_RE.match(line)
        if match:
            return int(match.group(1))
    return None
