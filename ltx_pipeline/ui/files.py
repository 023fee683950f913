"""Which workspace files the dashboard serves, and the URLs it links them by.

Invariant: a file is served only when, after resolving every symlink, it lies strictly inside the
workspace root, is a regular file (no folder listings) and has a suffix of the media and text kinds
below. Anything else is answered as missing (404), so a probe learns nothing about what exists. Logs and
databases are never served: a log may hold what a user typed into an environment variable.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

__all__ = ["MEDIA_TYPES", "file_url", "read_inside", "servable"]

# suffix -> the media type sent; text kinds go out as plain text so a browser never renders them as a page.
MEDIA_TYPES = {
    ".mp4": "video/mp4", ".webm": "video/webm", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
    ".gif": "image/gif", ".wav": "audio/wav", ".mp3": "audio/mpeg",
    ".md": "text/plain; charset=utf-8", ".yaml": "text/plain; charset=utf-8", ".json": "text/plain; charset=utf-8",
}


def servable(root: Path, relative: str) -> Path | None:
    """The file ``relative`` names under ``root``, or None when it must not be served.

    Args:
        root: the workspace root (already resolved).
        relative: the URL's path below ``/files/``, as the client sent it.
    """
    if not relative or "\x00" in relative or relative.startswith("/"):
        return None
    try:
        resolved = (root / relative).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if root not in resolved.parents or not resolved.is_file():
        return None
    return resolved if resolved.suffix.lower() in MEDIA_TYPES else None


def file_url(root: Path, path: str | Path | None) -> str | None:
    """The ``/files/...`` URL of a path a run recorded, or None when it is not a servable file in the workspace."""
    if not path:
        return None
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        relative = candidate.resolve().relative_to(root)
    except (OSError, ValueError, RuntimeError):
        return None
    if servable(root, relative.as_posix()) is None:
        return None
    return "/files/" + quote(relative.as_posix())


def read_inside(root: Path, path: str | Path | None) -> str:
    """The text of a servable file inside the workspace, or "" (missing, outside, not text): what a page may show."""
    if not path:
        return ""
    candidate = Path(path) if Path(path).is_absolute() else root / path
    try:
        found = servable(root, candidate.resolve().relative_to(root).as_posix())
        return found.read_text(encoding="utf-8") if found is not None else ""
    except (OSError, ValueError, RuntimeError, UnicodeDecodeError):
        return ""
