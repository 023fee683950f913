"""A full disk as one line: what is full, that nothing committed was lost, and the fix.

No space reaches the CLI in several shapes: an ``OSError`` ENOSPC or EDQUOT from a write (bare, or as the
cause of ``atomic_write``'s ``BadInput`` or of a ``PhaseFailed``), SQLite's ``OperationalError`` "database or
disk is full" (bare, or wrapped by SQLAlchemy), PostgreSQL's ``DiskFull`` (SQLSTATE 53100). ``disk_full``
finds any of them in an exception's chain and names the disk with its free bytes. Nothing is lost in any
of these: a store write is one transaction, which rolls back whole, and ``atomic_write`` replaces a file
only once the new one is complete. Standard library only: ``cli.main`` calls this on its error path.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ltx_pipeline.errors import DiskFull, LtxPipelineError

__all__ = ["disk_full"]

_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = "database or disk is full"
_POSTGRES_DISK_FULL = "53100"  # SQLSTATE disk_full
_NOTHING_LOST = ("nothing was lost: the store keeps its last committed state (a failed write is rolled back "
                 "whole) and no file is left half-written")
_FIX = "free space on that disk (or raise your quota), then run the command again (`ltx-pipeline resume` for a run)"


def disk_full(exc: BaseException, workspace: Path, store: Path | str) -> DiskFull | None:
    """The one-line error for ``exc`` when it (or what caused it) is a full disk, else None.

    Args:
        exc: what the command raised.
        workspace: the command's workspace (where files and the SQLite store are written).
        store: the store it uses: the SQLite file, or a server's (redacted) URL.
    """
    # An error of ours counts only through what it says caused it (``raise ... from``); anything else
    # also through what was being handled when it was raised (a rollback that failed on the same disk).
    follow_context = not isinstance(exc, LtxPipelineError)
    for cause in _chain(exc, follow_context):
        if isinstance(cause, OSError) and cause.errno in _NO_SPACE:
            written = Path(cause.filename) if isinstance(cause.filename, str) else _path_named(exc) or workspace
            return _on_disk(cause.strerror or "no space left", written)
        if getattr(cause, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return DiskFull(f"The store's database server has no space left; {_NOTHING_LOST}", where=str(store),
                            fix="free space on the server's disk, then run the command again "
                                "(`ltx-pipeline resume` for a run)")
        if type(cause).__name__ == "OperationalError" and _SQLITE_FULL in str(cause):
            return _on_disk(_SQLITE_FULL, store if isinstance(store, Path) else workspace)
    return None


def _chain(exc: BaseException, follow_context: bool) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is known for known in seen):
            continue
        seen.append(current)
        orig = getattr(current, "orig", None)  # SQLAlchemy's DBAPIError keeps the driver's error here
        todo.extend([orig if isinstance(orig, BaseException) else None, current.__cause__,
                     current.__context__ if follow_context else None])
    return seen


def _path_named(exc: BaseException) -> Path | None:
    """The file an error of ours names as its place (``atomic_write`` names the file it could not write)."""
    where = getattr(exc, "where", None)
    return Path(where) if isinstance(where, str) and where.startswith("/") else None


def _on_disk(words: str, written: Path) -> DiskFull:
    return DiskFull(f"The disk is full ({words}) writing {written}; {_NOTHING_LOST}",
                    where=_free_words(written), fix=_FIX)


def _free_words(path: Path) -> str:
    """``<folder>: N free`` for the nearest existing folder of ``path`` (its filesystem's free bytes)."""
    folder = path
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return str(folder)
    return f"{folder}: {_size(free)} free"


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"  # unreachable: the loop returns at TiB
