"""``ltx-pipeline cache ls|verify|prune``: JSON, exact lines and exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ltx_pipeline.cache import EntryStore, Want, assemble
from ltx_pipeline.cache.entries import DATA_FILE
from ltx_pipeline.cli import main
from ltx_pipeline.store import Store
from ltx_pipeline.store.states import RunState
from ltx_pipeline.workspace import Workspace
from tests.unit.cache.conftest import age_entry, age_uses, put, video_key


@pytest.fixture
def filled(tmp_path: Path) -> tuple[Path, EntryStore, dict[str, str]]:
    """A workspace with a live run (r-live), a finished one (r-done), and an old unused entry."""
    workspace = tmp_path / "ws"
    ws = Workspace.at(workspace)
    ws.create()
    db = Store.open(ws.store)
    db.create_run("r-live", {})
    done = db.create_run("r-done", {})
    db.set_state(int(done.id or 0), RunState.FINISHED.value)
    store = EntryStore.for_workspace(ws.root)
    keys = {role: video_key(f"m-{role}", f"{role}.mp4") for role in ("live", "finished", "old")}
    for key in keys.values():
        put(store, key)
    for run, role in (("r-live", "live"), ("r-done", "finished")):
        run_root = ws.root / "runs" / run
        assemble(store, run_root / "dataset" / ".precomputed", [Want(keys[role], f"{role}.pt")],
                 workspace=ws.root, run=run, run_root=run_root)
    for key in keys.values():
        age_entry(store, key.name, 40)
    age_uses(store, 40)
    return ws.root, store, {role: key.name for role, key in keys.items()}


def test_ls_json_lists_each_entry_with_its_runs(filled: tuple[Path, EntryStore, dict[str, str]],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store, names = filled
    assert main(["cache", "ls", "--workspace", str(workspace), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["root"] == str(store.root) and listing["total_bytes"] == 3 * 700
    rows = {row["name"]: row for row in listing["entries"]}
    assert {name: rows[name]["runs"] for name in names.values()} == {
        names["live"]: ["r-live"], names["finished"]: ["r-done"], names["old"]: []}
    assert rows[names["live"]]["subject"] == "live.mp4" and rows[names["live"]]["bucket"] == "512x288x49"


def test_ls_prints_a_table_and_a_total(filled: tuple[Path, EntryStore, dict[str, str]],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store, _names = filled
    assert main(["cache", "ls", "--workspace", str(workspace)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"3 entries, 2.1 KiB in {store.root}."
    assert any("live.mp4" in line and "40d ago" in line and "r-live" in line for line in lines)


def test_prune_keeps_live_runs_entries_and_says_what_it_freed(filled: tuple[Path, EntryStore, dict[str, str]],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store, names = filled
    assert main(["cache", "prune", "--workspace", str(workspace), "--older-than", "30d", "--keep-used"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"Removed 1 entry from {store.root}, 700 B freed.",
                                                    "Kept 2 in use, 0 used within 30d."]
    assert main(["cache", "prune", "--workspace", str(workspace)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Removed 1 entry from {store.root}, 0 B freed (1 still hard-linked in runs' folders).", "Kept 1 in use."]
    assert [row.name for row in store.entries()] == [names["live"]]


def test_prune_refuses_a_bad_age_with_one_line(filled: tuple[Path, EntryStore, dict[str, str]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    workspace, _store, _names = filled
    assert main(["cache", "prune", "--workspace", str(workspace), "--older-than", "30 days"]) == 2
    assert capsys.readouterr().err.strip() == ("error: '30 days' is not a duration (--older-than). "
                                               "Fix: write a number and a unit: 30d, 12h, 90m, 2w.")


def test_verify_quarantines_a_bad_entry_and_exits_2(filled: tuple[Path, EntryStore, dict[str, str]],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store, names = filled
    data = store.folder_of(names["old"]) / DATA_FILE
    os.chmod(data, 0o644)
    data.write_bytes(b"x" * 700)
    assert main(["cache", "verify", "--workspace", str(workspace)]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"bad entry {names['old']}: data.pt's content differs from its recorded sha256; "
                               f"quarantined in {store.quarantine_dir}/")
    assert lines[1] == f"3 entries checked in {store.root}: 1 bad."
    assert main(["cache", "verify", "--workspace", str(workspace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checked"] == 2
