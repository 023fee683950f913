"""The folders the studio may list and read: the ``--data-root`` folders, nothing outside them.

A path is judged after ``..`` is refused outright and symlinks are followed (``Path.resolve``): a link in a
root that leads out of it is outside. The folder picker lists a folder's subfolders, videos and metadata
files (``browse``), leaving out hidden names and whatever leads out of the roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import UnsafePath

__all__ = ["METADATA", "VIDEOS", "OutsideRoots", "browse", "inside_roots"]

VIDEOS = frozenset({".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v"})
METADATA = frozenset({".json", ".jsonl", ".csv"})


class OutsideRoots(UnsafePath):
    """A path the studio may not list or read (outside every --data-root): HTTP 403."""


def inside_roots(roots: Sequence[Path], value: object, where: str) -> Path:
    """``value`` (a path the page sent) resolved, when it lies inside one of ``roots``.

    Raises:
        OutsideRoots: no roots were given, the path is relative, has ``..``, or resolves outside every root.
    """
    if not roots:
        raise OutsideRoots("This dashboard was started without --data-root: it reads no dataset folder",
                           where=where, fix="restart it with `ltx-pipeline ui --data-root DIR` (repeatable)")
    text = value if isinstance(value, str) else ""
    path = Path(text).expanduser()
    if not text or not path.is_absolute() or ".." in path.parts:
        raise OutsideRoots(f"{text!r} is not an absolute path without '..'", where=where,
                           fix="pick it with the folder picker, or give its full path under a data root")
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        raise OutsideRoots(f"{text} is outside the data roots ({', '.join(str(r) for r in roots)})", where=where,
                           fix="pick a folder under a data root, or restart `ltx-pipeline ui` with another "
                               "--data-root")
    return resolved


def browse(roots: Sequence[Path], value: str | None) -> dict[str, Any]:
    """The picker's listing of ``value`` (None: the roots themselves).

    Raises:
        OutsideRoots: ``value`` is outside every root.
    """
    shown = [str(r) for r in roots]
    if value is None or value == "":
        return {"roots": shown, "path": None, "parent": None,
                "entries": [{"name": str(r), "path": str(r), "kind": "dir"} for r in roots if r.is_dir()]}
    folder = inside_roots(roots, value, "path")
    if not folder.is_dir():
        raise OutsideRoots(f"{value} is not a folder", where="path", fix="pick a folder under a data root")
    entries = []
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        kind = _kind(child, roots)
        if kind is not None:
            entries.append({"name": child.name, "path": str(folder / child.name), "kind": kind})
    parent = None if folder in roots else str(folder.parent)
    return {"roots": shown, "path": str(folder), "parent": parent, "entries": entries}


def _kind(child: Path, roots: Sequence[Path]) -> str | None:
    if child.name.startswith("."):
        return None
    try:
        resolved = child.resolve()
        if not any(resolved.is_relative_to(root) for root in roots):
            return None  # a link leading out of the roots is not shown
        if resolved.is_dir():
            return "dir"
    except OSError:
        return None
    suffix = child.suffix.lower()
    return "video" if suffix in VIDEOS else "metadata" if suffix in METADATA else None
