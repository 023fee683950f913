"""Pruning the latent cache: remove entries nobody needs, never one a live or resumable run references.

Owns the rule. An entry is protected when a use record references it and that record belongs to a run the
caller names live or resumable, to another workspace (sharing a team's cache: this caller cannot judge its
runs), or was written after the prune began (a run assembling now); with ``keep_used``, any use record
protects. Of the rest, an entry is removed when its last use (its newest use record, else its creation) is
older than ``older_than`` (None: any age). Each removal holds the key's lock (a key being linked or made is
skipped) and renames the entry out of ``entries/`` before deleting it, so an interrupted prune leaves only
whole entries. Quarantined entries past ``older_than`` go too, and what interrupted writers left.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.cache._locks import held
from ltx_pipeline.cache.entries import DATA_FILE, EntryStore
from ltx_pipeline.cache.uses import USES_DIR, UseRecord, read_uses
from ltx_pipeline.cache.verify import clean_leftovers

__all__ = ["Pruned", "RemovedEntry", "last_uses", "protected_keys", "prune"]


@dataclass(frozen=True)
class RemovedEntry:
    """One entry removed: its name, its size, and the bytes that freed (0 while a run's hard link still holds them)."""

    name: str
    size: int
    freed: int
    idle_s: float


@dataclass(frozen=True)
class Pruned:
    """What ``prune`` removed and kept."""

    removed: tuple[RemovedEntry, ...]
    kept_protected: int
    kept_recent: int
    busy: tuple[str, ...]
    quarantine_removed: int
    leftovers_removed: int

    @property
    def bytes_freed(self) -> int:
        return sum(entry.freed for entry in self.removed)


def protected_keys(records: Collection[UseRecord], *, workspace: Path, live_runs: Collection[str],
                   keep_used: bool, since: float) -> frozenset[str]:
    """The key names ``records`` protect (see the module's rule)."""
    here = str(workspace.expanduser().resolve())
    keys: set[str] = set()
    for record in records:
        if keep_used or record.workspace != here or record.run in live_runs or record.updated_at >= since:
            keys |= record.keys
    return frozenset(keys)


def last_uses(records: Collection[UseRecord]) -> dict[str, float]:
    """Key name -> the newest ``updated_at`` of the records that reference it."""
    last: dict[str, float] = {}
    for record in records:
        for key in record.keys:
            last[key] = max(last.get(key, 0.0), record.updated_at)
    return last


def _uses_stamp(store: EntryStore) -> int:
    try:
        return (store.root / USES_DIR).stat().st_mtime_ns
    except OSError:
        return 0


def _remove(store: EntryStore, folder: Path) -> tuple[int, int]:
    """Rename the entry out of ``entries/``, then delete it; its size and the bytes freed."""
    data = folder / DATA_FILE
    try:
        stat = data.stat()
        size, freed = stat.st_size, (stat.st_size if stat.st_nlink <= 1 else 0)
    except OSError:
        size = freed = 0
    doomed = store.staging_dir / f"{folder.name}.{socket.gethostname()}.{os.getpid()}.prune"
    doomed.parent.mkdir(parents=True, exist_ok=True)
    os.rename(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)
    return size, freed


def prune(store: EntryStore, *, older_than: float | None, keep_used: bool, live_runs: Collection[str],
          workspace: Path, now: float | None = None) -> Pruned:
    """Remove the cache entries no live or resumable run references and that were unused for ``older_than`` s.

    Args:
        store: the cache.
        older_than: seconds since an entry's last use (None: any).
        keep_used: keep every entry any use record references (finished runs' too).
        live_runs: names of this workspace's runs that are live or may be resumed.
        workspace: the caller's workspace (use records of other workspaces always protect).
        now: the clock (tests).
    """
    started = time.time() if now is None else now
    records = read_uses(store.root)
    protected = protected_keys(records, workspace=workspace, live_runs=live_runs, keep_used=keep_used, since=started)
    last, stamp = last_uses(records), _uses_stamp(store)
    removed: list[RemovedEntry] = []
    busy: list[str] = []
    kept_protected = kept_recent = 0
    for folder in list(store.entries()):
        entry = store.read(folder)
        idle = started - max(last.get(folder.name, 0.0), entry.created_at if entry else 0.0)
        if folder.name in protected:
            kept_protected += 1
            continue
        if older_than is not None and idle <= older_than:
            kept_recent += 1
            continue
        with held(store.lock_path(folder.name), timeout=0) as got:
            if got and _uses_stamp(store) != stamp:  # a run recorded uses meanwhile: judge again
                records, stamp = read_uses(store.root), _uses_stamp(store)
                protected = protected_keys(records, workspace=workspace, live_runs=live_runs,
                                           keep_used=keep_used, since=started)
            if not got:
                busy.append(folder.name)
                continue
            if folder.name in protected:
                kept_protected += 1
                continue
            size, freed = _remove(store, folder)
        removed.append(RemovedEntry(folder.name, size, freed, idle))
    return Pruned(tuple(removed), kept_protected, kept_recent, tuple(busy),
                  _prune_quarantine(store, older_than, started), len(clean_leftovers(store)))


def _prune_quarantine(store: EntryStore, older_than: float | None, now: float) -> int:
    count = 0
    for item in sorted(store.quarantine_dir.iterdir()) if store.quarantine_dir.is_dir() else ():
        try:
            age = now - item.stat().st_mtime
        except OSError:
            continue
        if older_than is None or age > older_than:
            shutil.rmtree(item, ignore_errors=True)
            count += 1
    return count
