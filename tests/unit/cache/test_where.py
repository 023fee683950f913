"""The ``cache`` commands look where runs put the cache, and ``rm`` drops the removed run's use record (#44)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ltx_pipeline.cache import EntryStore, Want, assemble, read_uses
from ltx_pipeline.cli import main
from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.store import Store
from ltx_pipeline.store.states import RunState
from ltx_pipeline.workspace import Workspace
from tests.unit.cache.conftest import put, video_key


def _workspace(tmp_path: Path, cache: Path | None = None) -> tuple[Path, EntryStore]:
    """A workspace whose finished run ``r-done`` linked one entry of the cache at ``cache`` (default its own)."""
    ws = Workspace.at(tmp_path / "ws")
    ws.create()
    db = Store.open(ws.store)
    db.set_state(int(db.create_run("r-done", {}).id or 0), RunState.FINISHED.value)
    store = EntryStore.for_workspace(ws.root, cache)
    key = video_key()
    put(store, key)
    run_root = ws.run("r-done").root
    assemble(store, run_root / "dataset" / ".precomputed", [Want(key, "a.pt")], workspace=ws.root, run="r-done",
             run_root=run_root)
    return ws.root, store


def test_the_commands_read_the_team_cache_runs_use_and_cache_dir_still_overrides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team-cache"
    workspace, store = _workspace(tmp_path, team)
    monkeypatch.setenv(LATENT_CACHE_ENV, str(team))
    assert main(["cache", "ls", "--workspace", str(workspace), "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["root"] == str(team) and [row["runs"] for row in listing["entries"]] == [["r-done"]]
    own = workspace / "cache" / "latents"
    assert main(["cache", "ls", "--workspace", str(workspace), "--cache-dir", str(own)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"0 entries, 0 B in {own}."]


def test_with_the_cache_off_the_commands_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store = _workspace(tmp_path)
    monkeypatch.setenv(LATENT_CACHE_ENV, "off")
    for command in ("ls", "verify", "prune"):
        assert main(["cache", command, "--workspace", str(workspace)]) == 0
        assert capsys.readouterr().out.replace("\n", " ").strip() == (
            f"The latent cache is off (${LATENT_CACHE_ENV} says so): runs preprocess every stage whole and cache "
            f"nothing. Unset {LATENT_CACHE_ENV} to use the workspace's cache/latents, or pass --cache-dir DIR to "
            "look at a cache folder.")
    assert len(list(store.entries())) == 1  # prune removed nothing
    assert main(["cache", "ls", "--workspace", str(workspace), "--cache-dir", str(store.root), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["entries"]) == 1


def test_rm_forgets_the_runs_use_record_so_prune_may_free_its_entries(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace, store = _workspace(tmp_path)
    assert [record.run for record in read_uses(store.root)] == ["r-done"]
    assert main(["rm", "r-done", "--workspace", str(workspace), "--yes"]) == 0
    assert read_uses(store.root) == []
    capsys.readouterr()
    assert main(["cache", "prune", "--workspace", str(workspace), "--keep-used"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"Removed 1 entry from {store.root}, 700 B freed."


def test_each_preprocessed_set_has_one_name_everywhere() -> None:
    """status, the dashboard and preprocessing's narration name a set the same way (the holdout is not "stage -1")."""
    from ltx_pipeline.cache.hits import HOLDOUT_STAGE, SANITY_STAGE, StageHits, stage_label

    assert [stage_label(s) for s in (SANITY_STAGE, HOLDOUT_STAGE, 1, 2)] == [
        "sanity set", "holdout set", "stage 1", "stage 2"]
    assert StageHits(HOLDOUT_STAGE, 3, 3, 0, 0, "/c", 0.0).label == "holdout set"
