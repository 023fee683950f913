"""Follow a growing trainer log from a byte offset, returning only new, complete lines.

This module owns incremental reading of the log file the trainer's stdout/stderr go to. The caller
stores the returned offset (in the store) and hands it back later, so re-attaching after an engine
restart never returns a line twice. A last line without its ``\\n`` is left for the next read, since
the trainer may still be writing it; ``final=True`` takes it once the trainer has exited. A poll of an
unchanged file costs one ``stat`` (same file, same size: nothing is opened); new data is read in
blocks of up to ``DEFAULT_MAX_BYTES``. Pure standard library: the CLI imports it at start-up.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_MAX_BYTES", "FAILURE_TAIL_LINES", "LAUNCH_BOUNDARY", "LogFollower", "failure_tail", "read_tail"]

DEFAULT_MAX_BYTES = 8 * 1024 * 1024


class LogFollower:
    """Read a log incrementally from ``offset`` (bytes).

    Truncation or rotation is detected when the file is now shorter than the offset, or (within one
    follower's life) when the path now names a different file; reading then restarts at byte 0.
    """

    def __init__(self, path: Path | str, offset: int = 0) -> None:
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.path = Path(path)
        self.offset = offset
        self._identity: tuple[int, int] | None = None

    def read_new(self, max_bytes: int = DEFAULT_MAX_BYTES, *, final: bool = False) -> tuple[list[str], int]:
        """Return the complete lines written since the offset, and the new offset.

        Args:
            max_bytes: read at most this many bytes per call; call again while lines keep coming.
            final: also consume a trailing line that has no newline (the writer has exited).

        Returns:
            ``(lines, offset)``: lines without their line endings, decoded as UTF-8 with replacement
            characters for invalid bytes, and the byte offset just past the last consumed line. A
            missing file yields ``([], offset)``.
        """
        text, offset = self.read_text(max_bytes, final=final)
        if not text:
            return [], offset
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
        if "\r" in text:  # one scan of the block instead of a test per line
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        return lines, offset

    def read_text(self, max_bytes: int = DEFAULT_MAX_BYTES, *, final: bool = False) -> tuple[str, int]:
        """``read_new`` without the split: the new complete lines as one string (each with its ``\\n``).

        ``LogParser.feed_text`` parses such a block faster than its lines one by one; carriage returns
        are left in place for the parser. Returns ``("", offset)`` when nothing complete is new.
        """
        if self._unchanged():
            return "", self.offset
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below; fstat needs the handle
        except FileNotFoundError:
            return "", self.offset
        with handle:
            info = os.fstat(handle.fileno())
            identity = (info.st_dev, info.st_ino)
            if info.st_size < self.offset or (self._identity is not None and identity != self._identity):
                self.offset = 0
            self._identity = identity
            if info.st_size == self.offset:
                return "", self.offset
            handle.seek(self.offset)
            data = handle.read(max_bytes)
        end = data.rfind(b"\n")
        if end < 0:
            # A line longer than max_bytes is consumed in pieces rather than blocking the follower.
            if not (final or len(data) >= max_bytes):
                return "", self.offset
            consumed = data
        elif final and len(data) < max_bytes:
            consumed = data
        else:
            consumed = data[: end + 1]
        self.offset += len(consumed)
        return consumed.decode("utf-8", errors="replace"), self.offset

    def _unchanged(self) -> bool:
        """True when a stat shows the same file at the same size as last read: nothing to open or read."""
        try:
            info = os.stat(self.path)
        except OSError:
            return False  # let the open decide (a missing file yields nothing there)
        return (info.st_dev, info.st_ino) == self._identity and info.st_size == self.offset


def read_tail(path: Path | str, n: int = 200, max_bytes: int = 1024 * 1024) -> list[str]:
    """The last ``n`` lines of a file (at most ``max_bytes`` read from its end); [] if it is missing.

    Used to hand a failed run's log tail to ``classify_failure`` without reading the whole log.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = [line.rstrip("\r") for line in data.decode("utf-8", errors="replace").split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    if start > 0 and lines:
        lines = lines[1:]  # the first line was cut by the byte window
    return lines[-n:] if n > 0 else []


# What ``phases/train.py`` writes into a stage's log before each launch (the log is appended across launches).
LAUNCH_BOUNDARY = "=== ltx-pipeline: launch"
# Enough for a two-rank traceback, torchrun's summary and the phase line before them.
FAILURE_TAIL_LINES = 400


def failure_tail(path: Path | str, n: int = FAILURE_TAIL_LINES) -> list[str]:
    """The lines a failure is classified from: the log's last ``n``, after its last launch boundary.

    The engine (train, autotune trials, evaluate) and ``ltx-pipeline diagnose`` read the same lines, so
    ``status``, ``failure.md`` and ``diagnose`` agree on the same log.
    """
    tail = read_tail(path, n)
    boundary = max((i for i, line in enumerate(tail) if line.startswith(LAUNCH_BOUNDARY)), default=-1)
    return tail[boundary + 1:]
