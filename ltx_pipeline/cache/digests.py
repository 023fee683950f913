"""The identities the latent cache's keys are made of that must be read from files: media and encoder code.

Owns two things. ``MediaDigests``: a media file's full content digest (``sha256:``), remembered in
``<workspace>/cache/media-digests.json`` by resolved path, size, mtime_ns and inode, so an unchanged file is
read once (a file replaced or rewritten gets a new digest; the file is written with ``atomic_write``, merged
with what other processes wrote meanwhile). And the identity of the code that encodes: the LTX-2 trainer
checkout's (``trainer_identity``: ltx-trainer's version and a digest of the source of ltx-trainer's
``src/`` and ``scripts/``, ltx-core's ``src/`` and ``uv.lock``, which pins torch) or, for the backends whose
preprocessing is ltx-pipeline's own, ltx-pipeline's (``code_identity``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

from ltx_pipeline.cache.keys import Identity
from ltx_pipeline.code_identity import code_identity
from ltx_pipeline.workspace import atomic_write

__all__ = ["MEDIA_DIGESTS", "MediaDigests", "encoder_identity", "trainer_identity"]

MEDIA_DIGESTS = Path("cache") / "media-digests.json"
_CHUNK = 1 << 20
_SOURCES = ("packages/ltx-trainer/src", "packages/ltx-trainer/scripts", "packages/ltx-core/src")
_VERSION = re.compile(r'^version\s*=\s*"([^"]+)"', re.MULTILINE)


def _file_sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


class MediaDigests:
    """Media files' content digests, remembered per workspace by (path, size, mtime_ns, inode).

    Use as a context manager (``with MediaDigests(workspace) as digests: digests.of(path)``) or call
    ``save`` when done: new digests are written once, not per file.
    """

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.file = workspace / MEDIA_DIGESTS
        self._known = self._load()
        self._new: dict[str, dict[str, Any]] = {}
        self.hashed = 0  # files read in full by this object (the rest came from the file)

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            loaded = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        files = loaded.get("files") if isinstance(loaded, dict) else None
        return {str(k): v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}

    def of(self, path: Path) -> Identity:
        """The file's content digest, labelled with its name.

        Raises:
            OSError: the file cannot be read.
        """
        resolved = path.expanduser().resolve()
        stat = resolved.stat()
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}
        entry = self._new.get(str(resolved)) or self._known.get(str(resolved))
        if entry is not None and all(entry.get(k) == v for k, v in stamp.items()) and entry.get("digest"):
            return Identity(str(entry["digest"]), resolved.name)
        digest = _file_sha256(resolved)
        self.hashed += 1
        self._new[str(resolved)] = {**stamp, "digest": digest}
        return Identity(digest, resolved.name)

    def save(self) -> None:
        """Write the digests learnt since opening, over what is on disk now (another process may have added some)."""
        if not self._new:
            return
        merged = {**self._load(), **self._new}
        atomic_write(self.file, json.dumps({"version": 1, "files": merged}, indent=1, sort_keys=True),
                     root=self.workspace)
        self._known, self._new = merged, {}

    def __enter__(self) -> MediaDigests:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.save()


def trainer_identity(root: Path) -> Identity:
    """The identity of an LTX-2 checkout's encoding code: ``ltx-trainer <version> (source <12 hex>)``.

    The source digest covers the names and bytes of every ``.py`` under ltx-trainer's ``src/`` and
    ``scripts/`` and ltx-core's ``src/``, and ``uv.lock``; it is recomputed only when one of those files'
    size or mtime changes (per process). A checkout without them has an identity of what is there.
    """
    listing = []
    for folder in _SOURCES:
        base = root / folder
        for path in sorted(base.rglob("*.py")) if base.is_dir() else ():
            stat = path.stat()
            listing.append((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    lock = root / "uv.lock"
    if lock.is_file():
        listing.append(("uv.lock", lock.stat().st_size, lock.stat().st_mtime_ns))
    return _checkout_identity(str(root), tuple(listing))


@lru_cache(maxsize=8)
def _checkout_identity(root_text: str, listing: tuple[tuple[str, int, int], ...]) -> Identity:
    root = Path(root_text)
    hasher = hashlib.sha256()
    for name, _size, _mtime in listing:
        hasher.update(name.encode("utf-8") + b"\0")
        hasher.update((root / name).read_bytes() + b"\0")
    source = hasher.hexdigest()
    try:
        match = _VERSION.search((root / "packages/ltx-trainer/pyproject.toml").read_text(encoding="utf-8"))
    except OSError:
        match = None
    version = match.group(1) if match else "unknown"
    return Identity(f"ltx-trainer {version} sha256:{source}", f"ltx-trainer {version} (source {source[:12]})")


def encoder_identity(checkout_root: Path | None) -> Identity:
    """Who encodes a backend's latents: the LTX-2 checkout's code (``checkout_root``), else ltx-pipeline's own.

    The ``reference`` and ``simulated`` backends preprocess with ltx-pipeline's toy programs, so their
    entries are keyed by ltx-pipeline's version and source digest and never mix with the real trainer's.
    """
    if checkout_root is not None and os.path.isdir(checkout_root):
        return trainer_identity(checkout_root)
    text = code_identity()
    return Identity(text, text)
