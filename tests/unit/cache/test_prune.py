"""Pruning: old unused entries go; what a live or resumable run references stays, and still resolves."""

from __future__ import annotations

import os
from pathlib import Path

from ltx_pipeline.cache import EntryStore, Want, assemble, prune
from tests.unit.cache.conftest import DAY as _DAY
from tests.unit.cache.conftest import age_entry as _age
from tests.unit.cache.conftest import age_uses as _age_uses
from tests.unit.cache.conftest import put, video_key


def _setup(store: EntryStore, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    workspace = tmp_path / "ws"
    keys = {role: video_key(f"m-{role}", f"{role}.mp4") for role in ("live", "finished", "old", "recent")}
    for key in keys.values():
        put(store, key)
    for run, role in (("r-live", "live"), ("r-done", "finished")):
        run_root = workspace / "runs" / run
        assemble(store, run_root / "dataset" / ".precomputed", [Want(keys[role], f"{role}.pt")],
                 workspace=workspace, run=run, run_root=run_root)
    for role in ("live", "finished", "old"):
        _age(store, keys[role].name, 40)
    _age_uses(store, 40)
    return workspace, {role: key.name for role, key in keys.items()}


def test_prune_removes_old_unused_entries_and_keeps_a_live_runs(store: EntryStore, tmp_path: Path,
                                                                monkeypatch: object) -> None:
    workspace, names = _setup(store, tmp_path)
    link = workspace / "runs" / "r-live" / "dataset" / ".precomputed" / "latents" / "live.pt"
    link.unlink()
    os.symlink(store.folder_of(names["live"]) / "data.pt", link)  # as on another file system
    pruned = prune(store, older_than=30 * _DAY, keep_used=False, live_runs={"r-live"}, workspace=workspace)
    assert sorted(entry.name for entry in pruned.removed) == sorted([names["finished"], names["old"]])
    assert (pruned.kept_protected, pruned.kept_recent, pruned.busy) == (1, 1, ())
    assert store.folder_of(names["live"]).is_dir() and store.folder_of(names["recent"]).is_dir()
    assert link.read_bytes() == b"latents" * 100  # the resumable run still finds its latents
    old = next(entry for entry in pruned.removed if entry.name == names["old"])
    finished = next(entry for entry in pruned.removed if entry.name == names["finished"])
    assert old.freed == old.size == 700 and finished.freed == 0  # r-done's hard link still holds its bytes
    assert pruned.bytes_freed == 700 and old.idle_s > 30 * _DAY


def test_keep_used_keeps_what_any_run_used(store: EntryStore, tmp_path: Path) -> None:
    workspace, names = _setup(store, tmp_path)
    pruned = prune(store, older_than=30 * _DAY, keep_used=True, live_runs=set(), workspace=workspace)
    assert [entry.name for entry in pruned.removed] == [names["old"]]
    assert pruned.kept_protected == 2


def test_another_workspaces_uses_protect_and_no_age_limit_removes_all_else(store: EntryStore,
                                                                          tmp_path: Path) -> None:
    workspace, names = _setup(store, tmp_path)
    pruned = prune(store, older_than=None, keep_used=False, live_runs=set(), workspace=tmp_path / "another")
    assert sorted(entry.name for entry in pruned.removed) == sorted([names["old"], names["recent"]])


def test_a_key_held_by_another_process_is_skipped_not_removed(store: EntryStore, tmp_path: Path) -> None:
    from ltx_pipeline.cache._locks import held

    workspace, names = _setup(store, tmp_path)
    with held(store.lock_path(names["old"])):
        import multiprocessing

        queue = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(
            target=lambda: queue.put(prune(store, older_than=30 * _DAY, keep_used=True, live_runs=set(),
                                           workspace=workspace).busy))
        child.start()
        busy = queue.get(timeout=10)
        child.join(10)
    assert busy == (names["old"],) and store.folder_of(names["old"]).is_dir()
