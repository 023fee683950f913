"""The latent cache as commands see it: list, verify, prune, for the CLI and the dashboard alike.

Owns the decisions the cache room leaves to its callers: where a workspace's cache is (the one its runs use:
``<workspace>/cache/latents``, or ``$LTX_PIPELINE_LATENT_CACHE``; ``--cache-dir`` overrides both; None when that
variable says ``off`` and no ``--cache-dir`` is given), which runs count as live or resumable for ``prune``
(every run of the workspace's store that has not finished: a new, gated, failed or interrupted run may be
resumed and needs its ``.precomputed``), and what one listing row says. Returns typed results; prints nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ltx_pipeline.cache import EntryStore, Pruned, Verdict, clean_leftovers, prune, read_uses, verify_entries
from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.preprocessing.cache_plan import cache_store as runs_cache
from ltx_pipeline.store import Store
from ltx_pipeline.store.states import RunState
from ltx_pipeline.workspace import Workspace

__all__ = ["CACHE_OFF", "CacheListing", "CacheRow", "CacheVerified", "cache_store", "list_cache", "live_runs",
           "prune_cache", "verify_cache"]

#: What the commands say when runs use no cache (the variable is ``off``) and no ``--cache-dir`` names one.
CACHE_OFF = (f"The latent cache is off (${LATENT_CACHE_ENV} says so): runs preprocess every stage whole and cache "
             f"nothing. Unset {LATENT_CACHE_ENV} to use the workspace's cache/latents, or pass --cache-dir DIR to "
             "look at a cache folder.")


@dataclass(frozen=True)
class CacheRow:
    """One complete entry: what it is, its size, its age and last use (seconds since the epoch), who uses it."""

    name: str
    modality: str
    subject: str
    bucket: str | None
    size: int
    created_at: float
    last_used: float
    runs: tuple[str, ...]  # this workspace's run names; ``<workspace>:<run>`` for another's


@dataclass(frozen=True)
class CacheListing:
    """``cache ls``: the entries, their total size, and the entries set aside or unreadable."""

    root: Path
    rows: tuple[CacheRow, ...]
    quarantined: int
    unreadable: int

    @property
    def total_bytes(self) -> int:
        return sum(row.size for row in self.rows)


@dataclass(frozen=True)
class CacheVerified:
    """``cache verify``: each entry's verdict (bad ones quarantined) and the interrupted writers' leftovers removed."""

    root: Path
    verdicts: tuple[Verdict, ...]
    leftovers_removed: int

    @property
    def bad(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if not v.ok)


def cache_store(workspace: Path | None, cache_dir: Path | None = None) -> tuple[Workspace, EntryStore | None]:
    """The workspace and the cache its runs use (``preprocessing.cache_plan.cache_store``: its own
    ``cache/latents``, or ``$LTX_PIPELINE_LATENT_CACHE``), or ``cache_dir`` when given (a path shared by a team);
    the store is None when the variable turns the cache off and no ``cache_dir`` is given."""
    ws = Workspace.at(workspace)
    if cache_dir is not None:
        return ws, EntryStore.for_workspace(ws.root, cache_dir)
    return ws, runs_cache(ws.root)


def live_runs(ws: Workspace) -> set[str]:
    """The workspace's runs that are live or may be resumed: every run in its store that has not finished."""
    if not ws.has_store():
        return set()
    return {run.name for run in Store.open(ws.store).list_runs() if run.state != RunState.FINISHED.value}


def list_cache(workspace: Path | None, cache_dir: Path | None = None) -> CacheListing | None:
    """Every complete entry with its size, age, last use and the runs that use it (None: the cache is off)."""
    ws, store = cache_store(workspace, cache_dir)
    if store is None:
        return None
    here = str(ws.root.resolve())
    users: dict[str, set[str]] = {}
    last: dict[str, float] = {}
    for record in read_uses(store.root):
        who = record.run if record.workspace == here else f"{record.workspace}:{record.run}"
        for key in record.keys:
            users.setdefault(key, set()).add(who)
            last[key] = max(last.get(key, 0.0), record.updated_at)
    rows: list[CacheRow] = []
    unreadable = 0
    for folder in store.entries():
        entry = store.read(folder)
        if entry is None:
            unreadable += 1
            continue
        bucket = entry.key.parts.get("bucket")
        rows.append(CacheRow(entry.key.name, entry.key.modality.value, entry.key.subject,
                             bucket.value if bucket else None, entry.size, entry.created_at,
                             max(last.get(entry.key.name, 0.0), entry.created_at),
                             tuple(sorted(users.get(entry.key.name, ())))))
    quarantined = sum(1 for _ in store.quarantine_dir.iterdir()) if store.quarantine_dir.is_dir() else 0
    rows.sort(key=lambda row: (row.subject, row.modality, row.name))
    return CacheListing(store.root, tuple(rows), quarantined, unreadable)


def verify_cache(workspace: Path | None, cache_dir: Path | None = None, *,
                 deep: bool = True) -> CacheVerified | None:
    """Check every entry (size, and with ``deep`` its sha256), quarantine the bad, clean interrupted writes
    (None: the cache is off)."""
    _ws, store = cache_store(workspace, cache_dir)
    if store is None:
        return None
    verdicts = tuple(verify_entries(store, deep=deep))
    return CacheVerified(store.root, verdicts, len(clean_leftovers(store)))


def prune_cache(workspace: Path | None, cache_dir: Path | None = None, *, older_than: float | None,
                keep_used: bool) -> tuple[Path, Pruned] | None:
    """Prune the cache (``cache.prune``), the live and resumable runs read from the workspace's store
    (None: the cache is off)."""
    ws, store = cache_store(workspace, cache_dir)
    if store is None:
        return None
    return store.root, prune(store, older_than=older_than, keep_used=keep_used, live_runs=live_runs(ws),
                             workspace=ws.root, now=time.time())
