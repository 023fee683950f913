"""Checking cache entries without loading a model, and putting bad ones where no run can use them.

Owns what makes an entry good (its record reads back and names its folder, its data has the recorded
size and sha256, and an optional loader hook, e.g. one that loads the tensors and checks their shapes,
finds nothing wrong), the quarantine (a bad entry is moved whole to ``quarantine/<name>.<time>/`` with
``reason.json``, so ``get`` no longer returns it and the next run makes it again), and the cleaning of
what interrupted writers left: staging folders of dead (or long gone) writers, and idle lock files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.cache._locks import held, remove_idle
from ltx_pipeline.cache.entries import DATA_FILE, RECORD_FILE, Entry, EntryStore

__all__ = ["Loader", "Verdict", "clean_leftovers", "quarantine", "verify_entries", "verify_entry"]

# A loader hook: the data file and its entry -> what is wrong with it, or None.
Loader = Callable[[Path, Entry], str | None]
_STAGING_GRACE_S = 24 * 3600  # a staging folder of another host's writer is left this long
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Verdict:
    """One entry checked: ``problem`` is None when good; a bad one is ``quarantined`` (None: it was busy)."""

    name: str
    size: int
    problem: str | None
    quarantined: Path | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _problem(store: EntryStore, folder: Path, *, deep: bool, loader: Loader | None) -> tuple[str | None, int]:
    """What is wrong with the entry in ``folder`` (None: nothing) and its data's size."""
    data = folder / DATA_FILE
    size = data.stat().st_size if data.is_file() else 0
    try:
        record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"{RECORD_FILE} missing or unreadable", size
    entry = store.read(folder)
    if entry is None:
        if not data.is_file():
            return f"{DATA_FILE} missing", size
        if isinstance(record, dict) and record.get("size") != size:
            return f"{DATA_FILE} has {size} bytes, its record says {record.get('size')}", size
        return f"{RECORD_FILE} does not describe this entry", size
    if deep:
        hasher = hashlib.sha256()
        with data.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        if "sha256:" + hasher.hexdigest() != entry.sha256:
            return f"{DATA_FILE}'s content differs from its recorded sha256", size
    if loader is not None:
        try:
            found = loader(data, entry)
        except Exception as exc:  # a loader that cannot read the data: that is the finding
            found = f"could not be loaded: {type(exc).__name__}: {exc}"
        if found:
            return found, size
    return None, size


def verify_entry(store: EntryStore, folder: Path, *, deep: bool = True, loader: Loader | None = None) -> Verdict:
    """Check one entry folder; a bad one is quarantined with the reason.

    Args:
        store: the cache.
        folder: the entry's folder (``store.folder(key)`` or one from ``store.entries()``).
        deep: also compare the data's sha256 with the recorded one (reads the whole file).
        loader: an optional hook returning what is wrong with the data (e.g. a tensor of the wrong shape).
    """
    problem, size = _problem(store, folder, deep=deep, loader=loader)
    moved = quarantine(store, folder, problem) if problem else None
    return Verdict(folder.name, size, problem, moved)


def verify_entries(store: EntryStore, *, deep: bool = True, loader: Loader | None = None) -> list[Verdict]:
    """Check every entry (``verify_entry``), in name order."""
    return [verify_entry(store, folder, deep=deep, loader=loader) for folder in store.entries()]


def quarantine(store: EntryStore, folder: Path, reason: str, *, timeout: float = 5.0) -> Path | None:
    """Move the entry in ``folder`` to ``quarantine/`` with ``reason.json``; None when its key stayed busy.

    Taken under the key's lock, so no claim or link of that key is in progress; the move is one rename.
    """
    with held(store.lock_path(folder.name), timeout=timeout) as got:
        if not got or not folder.is_dir():
            return None
        return store.set_aside(folder, reason)


def _writer_gone(name: str, age_s: float) -> bool:
    """A staging folder ``<key>.<host>.<pid>.<rand>``'s writer is gone: dead here, or long silent elsewhere."""
    parts = name.partition(".")[2].rsplit(".", 2)
    host, pid = (parts[0], parts[1]) if len(parts) == 3 else ("", "")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return age_s > _STAGING_GRACE_S


def clean_leftovers(store: EntryStore) -> list[Path]:
    """Remove what interrupted writers left (staging folders whose writer is gone) and idle lock files.

    Returns what was removed.
    """
    removed: list[Path] = []
    now = time.time()
    if store.staging_dir.is_dir():
        for stage in sorted(store.staging_dir.iterdir()):
            try:
                age = now - stage.stat().st_mtime
            except OSError:
                continue
            if _writer_gone(stage.name, age):
                shutil.rmtree(stage, ignore_errors=True)
                removed.append(stage)
    locks = store.root / "locks"
    for lock in sorted(locks.glob("*.lock")) if locks.is_dir() else ():
        if remove_idle(lock):
            removed.append(lock)
    return removed
