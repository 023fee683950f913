"""The store of cache entries on disk: one folder per key, complete or absent, never half-written.

Owns the layout under the cache root (``<workspace>/cache/latents/`` by default, or a team's path):

- ``entries/<modality>/<2 hex>/<key name>/``: ``data.pt`` (read-only, so a hard link in a run cannot be
  written through) and ``entry.json`` (the key's parts, the data's size and sha256, when and by whom);
- ``tmp/``: entries being written; ``locks/``: one lock file per key (and ``claiming.lock``, held while a
  fill takes its claims); ``quarantine/``: entries found bad.

Invariant: an entry folder appears only by ``rename`` of a complete staging folder whose files were
fsynced first, so a SIGKILL at any point leaves either no entry or a whole one; ``get`` also checks the
recorded size. ``claim`` takes the key's lock so that of several processes filling one key exactly one
makes it and the others find it made. Checking entries and quarantining bad ones is ``cache.verify``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from ltx_pipeline.cache._locks import held
from ltx_pipeline.cache.keys import CacheKey

__all__ = ["DATA_FILE", "DEFAULT_ROOT", "RECORD_FILE", "Claim", "ClaimState", "Entry", "EntryStore", "maker"]

DEFAULT_ROOT = Path("cache") / "latents"  # inside the workspace
DATA_FILE, RECORD_FILE = "data.pt", "entry.json"
RECORD_VERSION = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    """One complete entry: its key, its data file, and what its record says of it."""

    key: CacheKey
    folder: Path
    size: int
    sha256: str
    created_at: float  # seconds since the epoch
    made_by: str
    meta: Mapping[str, Any]

    @property
    def path(self) -> Path:
        """The data file (what a run's ``.precomputed`` links to)."""
        return self.folder / DATA_FILE


class ClaimState(StrEnum):
    """What a claim found: the caller must make the entry, another process made it, or (not waiting) it is busy."""

    MAKE = "make"
    MADE = "made"
    BUSY = "busy"


class Claim:
    """A claim on one key, held for a ``with EntryStore.claim(key)`` block (see ``EntryStore.claim``)."""

    def __init__(self, store: EntryStore, key: CacheKey, state: ClaimState, path: Path | None) -> None:
        self._store, self.key, self.state, self.path = store, key, state, path

    @property
    def must_make(self) -> bool:
        """True: this caller holds the key's lock and no entry exists; make it and ``put`` it."""
        return self.state is ClaimState.MAKE

    def put(self, source: Path, *, move: bool = False, meta: Mapping[str, Any] | None = None) -> Path:
        """Install ``source`` as this key's entry (moved when ``move`` and on the same file system, else copied).

        Returns:
            The entry's data file.

        Raises:
            RuntimeError: the claim is not ``MAKE`` (someone else made it, or it was not waited for).
        """
        if self.state is not ClaimState.MAKE:
            raise RuntimeError(f"claim on {self.key.short} is {self.state.value}: only a MAKE claim puts")
        self.path = self._store.install(self.key, source, move=move, meta=meta)
        self.state = ClaimState.MADE
        return self.path


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return "sha256:" + hasher.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def maker() -> str:
    """``host:pid`` of this process, as entries and staging folders name their writer."""
    return f"{socket.gethostname()}:{os.getpid()}"


class EntryStore:
    """The entries under one cache root."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser().absolute()

    @classmethod
    def for_workspace(cls, workspace: Path, root: Path | None = None) -> EntryStore:
        """The workspace's cache (``<workspace>/cache/latents``) or ``root`` (a path shared by a team)."""
        return cls(root if root is not None else workspace / DEFAULT_ROOT)

    @property
    def entries_dir(self) -> Path:
        return self.root / "entries"

    @property
    def staging_dir(self) -> Path:
        return self.root / "tmp"

    @property
    def quarantine_dir(self) -> Path:
        return self.root / "quarantine"

    def folder(self, key: CacheKey) -> Path:
        """Where ``key``'s entry lives (whether or not it exists)."""
        return self.folder_of(key.name)

    def folder_of(self, name: str) -> Path:
        modality, _, hexdigest = name.partition("-")
        return self.entries_dir / modality / hexdigest[:2] / name

    def lock_path(self, name: str) -> Path:
        return self.root / "locks" / f"{name}.lock"

    def read(self, folder: Path) -> Entry | None:
        """The entry in ``folder`` when its record reads back, names this folder and its data has the recorded size."""
        try:
            record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
            key = CacheKey.from_record(record["key"])
            size = (folder / DATA_FILE).stat().st_size
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if key.name != folder.name or size != record.get("size") or record.get("version") != RECORD_VERSION:
            return None
        return Entry(key, folder, size, str(record.get("sha256")), float(record.get("created_at") or 0),
                     str(record.get("made_by") or ""), dict(record.get("meta") or {}))

    def get(self, key: CacheKey) -> Path | None:
        """The data file of ``key``'s entry when it is complete (its record and size agree), else None."""
        entry = self.read(self.folder(key))
        return entry.path if entry is not None and entry.key.digest == key.digest else None

    def entries(self) -> Iterator[Path]:
        """Every entry folder (complete or not: ``read`` tells), in name order."""
        if not self.entries_dir.is_dir():
            return
        yield from sorted(p for p in self.entries_dir.glob("*/*/*") if p.is_dir())

    @contextmanager
    def claim(self, key: CacheKey, *, wait: bool = True, timeout: float | None = None) -> Iterator[Claim]:
        """Claim ``key`` for the block: of several processes claiming one key, one gets ``MAKE`` at a time.

        Yields a ``Claim``: ``MADE`` (with its path) when the entry exists, already or once the process
        that held the key made it; ``MAKE`` when this caller holds the key's lock and must make the entry
        (``claim.put``); ``BUSY`` when another process holds the key and ``wait`` is False (or ``timeout``
        seconds passed). The lock is released when the block ends, made or not (a maker that failed lets
        the next claimant make it); a SIGKILL releases it too.
        """
        found = self.get(key)
        if found is not None:
            yield Claim(self, key, ClaimState.MADE, found)
            return
        with held(self.lock_path(key.name), timeout=timeout if wait else 0) as got:
            if not got:
                yield Claim(self, key, ClaimState.BUSY, None)
                return
            found = self.get(key)
            state = ClaimState.MADE if found is not None else ClaimState.MAKE
            yield Claim(self, key, state, found)

    @contextmanager
    def claiming(self) -> Iterator[None]:
        """Hold the store's claims lock for the block: a caller taking many claims takes them all before another
        caller takes any (``claim(wait=False)`` never blocks), so two fills of the same rows never split a row's
        keys between them (each would then encode the whole row)."""
        with held(self.root / "locks" / "claiming.lock"):
            yield

    def set_aside(self, folder: Path, reason: str) -> Path:
        """Move an entry folder to ``quarantine/`` with ``reason.json`` (one rename); the caller holds its key."""
        target = self.quarantine_dir / f"{folder.name}.{time.strftime('%Y%m%dT%H%M%S')}.{uuid.uuid4().hex[:8]}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(folder, target)
        note = {"reason": reason, "at": time.time(), "by": maker()}
        (target / "reason.json").write_text(json.dumps(note, indent=1) + "\n", encoding="utf-8")
        return target

    def install(self, key: CacheKey, source: Path, *, move: bool = False,
                meta: Mapping[str, Any] | None = None) -> Path:
        """Write ``key``'s entry from ``source``: staged, fsynced, then renamed into place in one step.

        Callers hold the key's claim (``Claim.put``); without it two writers may both stage, and the
        second rename finds the entry there and keeps it.

        Returns:
            The entry's data file.
        """
        stage = self.staging_dir / f"{key.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        stage.mkdir(parents=True)
        try:
            data = stage / DATA_FILE
            if move:
                try:
                    os.replace(source, data)
                except OSError:  # another file system: copy instead
                    shutil.copyfile(source, data)
            else:
                shutil.copyfile(source, data)
            os.chmod(data, 0o444)
            _fsync(data)
            record = {"version": RECORD_VERSION, "key": key.to_record(), "size": data.stat().st_size,
                      "sha256": _sha256(data), "created_at": time.time(), "made_by": maker(), "meta": dict(meta or {})}
            (stage / RECORD_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
            _fsync(stage / RECORD_FILE)
            _fsync(stage)
            target = self.folder(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_dir() and self.get(key) is None:  # a bad entry there (the claim holds its key)
                self.set_aside(target, "replaced: its record or size did not match when the entry was made again")
            try:
                os.rename(stage, target)
            except OSError:
                if self.get(key) is None:
                    raise
                shutil.rmtree(stage, ignore_errors=True)  # made meanwhile by a writer without a claim
            _fsync(target.parent)
            return target / DATA_FILE
        except BaseException:
            if move and not source.exists() and (stage / DATA_FILE).is_file():
                os.replace(stage / DATA_FILE, source)  # give the caller its file back
            shutil.rmtree(stage, ignore_errors=True)
            raise
