"""``ltx-pipeline rm RUN`` (#43 point 8): a run's records, folder and studies go; the user's data and other runs stay.

Refused (exit 4) while its driver holds the lock or a process it launched is alive, or while a run's request
names a path inside its folder; an unknown run is exit 2 naming the known ones; off a terminal it needs --yes.
The same on the embedded SQLite store and on a shared PostgreSQL one.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from ltx_pipeline.cli import main
from tests.conftest import H100_SMI


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _planned(capsys: pytest.CaptureFixture[str], workspace: Path, dataset: Path, smi: str, *names: str) -> None:
    for name in names:
        code, _, err = _cli(capsys, "run", "--workspace", str(workspace), "--run", name, "--dataset", str(dataset),
                            "--nvidia-smi", smi)
        assert code == 3, err


def _runs(capsys: pytest.CaptureFixture[str], workspace: Path) -> list[str]:
    code, out, _ = _cli(capsys, "status", "--workspace", str(workspace), "--json")
    assert code == 0
    return [run["name"] for run in json.loads(out)["runs"]]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(params=["sqlite", "postgresql"])
def store_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "postgresql":
        monkeypatch.setenv("LTX_PIPELINE_STORE", request.getfixturevalue("store_url"))
    return str(request.param)


def test_rm_removes_the_run_its_folder_and_studies_and_keeps_everything_else(
        capsys: pytest.CaptureFixture[str], workspace: Path, clips_dataset: Path, fake_smi: Callable[..., str],
        store_kind: str) -> None:
    import optuna

    from ltx_pipeline.autotune.study import rdb_storage, storage_for

    _planned(capsys, workspace, clips_dataset, fake_smi(H100_SMI), "r1", "r10")
    data_before = _tree(clips_dataset.parent)
    other_before = _tree(workspace / "r10")
    (workspace / "r1" / "data-link").symlink_to(clips_dataset.parent)  # a link inside is removed, never followed
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = rdb_storage(storage_for(workspace))
    for name in ("r1-autotune", "r1-autotune-2", "r10-autotune"):
        optuna.create_study(storage=storage, study_name=name)

    code, out, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")

    assert code == 0, err
    assert out.startswith("Removed run r1: ") and "Optuna study r1-autotune, Optuna study r1-autotune-2" in out
    assert f"Its dataset {clips_dataset} is kept." in out
    assert not (workspace / "r1").exists()
    assert _runs(capsys, workspace) == ["r10"]
    assert _tree(clips_dataset.parent) == data_before and _tree(workspace / "r10") == other_before
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["r10-autotune"]
    if store_kind == "sqlite":
        import sqlite3

        with sqlite3.connect(workspace / "ltx-pipeline.db") as db:
            for table in ("phase_runs", "events", "approvals", "processes", "metrics", "checkpoints"):
                run_ids = {row[0] for row in db.execute(f"SELECT DISTINCT run_id FROM {table}")}  # noqa: S608
                assert len(run_ids) <= 1, (table, run_ids)  # only r10's rows remain


def test_an_unknown_run_is_exit_2_naming_the_known_ones(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                        clips_dataset: Path, fake_smi: Callable[..., str]) -> None:
    code, out, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")
    assert (code, out) == (2, "") and err.startswith("error: No run named 'r1' in ") and "has no runs" in err
    assert not workspace.exists()  # asking about a workspace creates nothing
    _planned(capsys, workspace, clips_dataset, fake_smi(H100_SMI), "r1", "r2")
    code, _, err = _cli(capsys, "rm", "ghost", "--workspace", str(workspace), "--yes")
    assert code == 2
    assert err == f"error: No run named 'ghost' in {workspace} (RUN). Fix: name one of its runs: r1, r2.\n"


def test_without_a_terminal_rm_needs_yes_and_on_one_it_asks(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                           clips_dataset: Path, fake_smi: Callable[..., str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _planned(capsys, workspace, clips_dataset, fake_smi(H100_SMI), "r1")
    code, _, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace))
    assert code == 2 and "needs a confirmation" in err and "Fix: pass --yes" in err and err.count("\n") == 1
    assert (workspace / "r1").is_dir()

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    code, out, _ = _cli(capsys, "rm", "r1", "--workspace", str(workspace))
    assert code == 4 and out.rstrip().endswith("Nothing removed.") and (workspace / "r1").is_dir()
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    code, out, _ = _cli(capsys, "rm", "r1", "--workspace", str(workspace))
    assert code == 0 and "Removed run r1" in out and not (workspace / "r1").exists()


def test_a_run_with_a_live_process_or_driver_is_refused(capsys: pytest.CaptureFixture[str], workspace: Path,
                                                        clips_dataset: Path, fake_smi: Callable[..., str],
                                                        store_kind: str) -> None:
    from ltx_pipeline.engine.lock import DriverLock
    from ltx_pipeline.engine.processes import host_id
    from ltx_pipeline.store import Process, Store, saved_id
    from ltx_pipeline.workspace import Workspace

    _planned(capsys, workspace, clips_dataset, fake_smi(H100_SMI), "r1")
    ws = Workspace.at(workspace)
    store = Store.open(ws.store)
    run = store.get_run("r1")
    assert run is not None
    with DriverLock(ws.run("r1").lock_file, "r1", store=store):  # a driver at work on it
        code, _, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")
    assert code == 4 and "is being driven by another process" in err, err
    # A trainer it launched, still alive (this very process stands in for it: its pid and start time).
    me = psutil.Process()
    row = store.add_process(Process(run_id=saved_id(run), phase="train", kind="train", pid=os.getpid(),
                                    create_time=me.create_time(), host=host_id(), cwd=str(workspace),
                                    printable="train", log_path=str(workspace / "r1" / "logs" / "train.log")))
    code, _, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")
    assert code == 4 and f"train of train (pid {os.getpid()} on {host_id()}) is alive" in err
    assert "Fix: stop it first (ltx-pipeline stop --run r1)" in err and (workspace / "r1").is_dir()
    store.update_process(saved_id(row), status="exited")  # it ended: nothing holds the run now
    code, _, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")
    assert code == 0, err
    store.close()


def test_a_path_of_the_users_inside_the_run_folder_is_never_removed(capsys: pytest.CaptureFixture[str],
                                                                    workspace: Path, clips_dataset: Path,
                                                                    fake_smi: Callable[..., str]) -> None:
    """A second run trains on the captions the first one prepared (in the first one's folder): rm of the first
    is refused, naming that path, until it is moved."""
    smi = fake_smi(H100_SMI)
    _planned(capsys, workspace, clips_dataset, smi, "r1")
    inside = workspace / "r1" / "mine" / "dataset.json"
    inside.parent.mkdir()
    inside.write_text(clips_dataset.read_text())
    (inside.parent / "videos").symlink_to(clips_dataset.parent / "videos")
    _planned(capsys, workspace, inside, smi, "r2")
    code, _, err = _cli(capsys, "rm", "r1", "--workspace", str(workspace), "--yes")
    assert code == 4 and f"The dataset of run r2 lies inside the folder rm would remove: {inside}" in err, err
    assert inside.is_file() and _runs(capsys, workspace) == ["r1", "r2"]
