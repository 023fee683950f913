"""``StoreReader`` (stdlib sqlite3, what ``status`` reads with) answers exactly as the SQLModel ``Store``.

Every query status makes is compared field by field on a workspace with a finished run (phases,
events, approvals, processes, metrics, checkpoints); every model column must come back as an
attribute, so the reader can never drift from the one schema (the models and their migrations).
A store at another schema is not read: ``open`` returns None and status uses the full store.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.cli import main
from ltx_pipeline.status.report import status_report
from ltx_pipeline.store import Store
from ltx_pipeline.store.models import Approval, Checkpoint, Event, Metric, PhaseRun, Process, Run
from ltx_pipeline.store.reader import StoreReader
from ltx_pipeline.store.revision import VERSION_TABLE
from ltx_pipeline.workspace import Workspace
from tests.phases.train_helpers import clips, simulated_args


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reader")
    workspace = root / "ws"
    assert main(simulated_args(workspace, clips(root / "data"), "--steps", "40", "--checkpoint-interval", "20",
                               "--skip-eval")) == 0
    return workspace


def same(full: Any, light: Any, model: type) -> None:
    for column in model.__table__.columns:  # every column of the one schema, as an attribute
        ours, theirs = getattr(light, column.name), getattr(full, column.name)
        assert ours == theirs, (model.__name__, column.name, ours, theirs)


def test_every_query_status_makes_answers_as_the_full_store(finished: Path) -> None:
    store, reader = Store.open(finished / "ltx-pipeline.db"), StoreReader.open(finished / "ltx-pipeline.db")
    assert reader is not None
    runs = store.list_runs()
    assert [r.name for r in reader.list_runs()] == [r.name for r in runs] == ["r1"]
    same(runs[0], reader.list_runs()[0], Run)
    same(runs[0], reader.get_run("r1"), Run)
    assert reader.get_run("nope") is None
    run_id = runs[0].id
    full_phases, light_phases = store.latest_phase_runs(run_id), reader.latest_phase_runs(run_id)
    assert list(light_phases) == list(full_phases) and "evaluate" in light_phases
    for name, row in full_phases.items():
        same(row, light_phases[name], PhaseRun)
    for full_rows, light_rows, model in (
            (store.events(run_id), reader.events(run_id), Event),
            (store.processes(run_id), reader.processes(run_id), Process),
            (store.processes(run_id, "train"), reader.processes(run_id, "train"), Process),
            (store.metrics(run_id), reader.metrics(run_id), Metric),
            (store.metrics(run_id, 1), reader.metrics(run_id, 1), Metric),
            (store.checkpoints(run_id), reader.checkpoints(run_id), Checkpoint),
            (store.checkpoints(run_id, 1), reader.checkpoints(run_id, 1), Checkpoint)):
        assert len(light_rows) == len(full_rows) > 0, model.__name__
        for full_row, light_row in zip(full_rows, light_rows, strict=True):
            same(full_row, light_row, model)
    subject = full_phases["plan"].approval_subject
    same(store.approval_for(run_id, subject), reader.approval_for(run_id, subject), Approval)
    assert reader.approval_for(run_id, "sha256:none") is None
    workspace = Workspace.at(finished)
    assert status_report(reader, workspace) == status_report(store, workspace)


def test_a_store_at_another_schema_or_no_store_is_not_read(tmp_path: Path, finished: Path) -> None:
    assert StoreReader.open(tmp_path / "missing.db") is None
    copy = tmp_path / "old.db"
    db = sqlite3.connect(copy)
    sqlite3.connect(finished / "ltx-pipeline.db").backup(db)  # the WAL's pages too, not only the main file
    db.execute(f"UPDATE {VERSION_TABLE} SET version_num = '0001'")
    db.commit()
    assert StoreReader.open(copy) is None
    not_ours = tmp_path / "other.db"
    sqlite3.connect(not_ours).execute("CREATE TABLE t (x)")
    assert StoreReader.open(not_ours) is None


def test_status_on_an_older_store_upgrades_it_through_the_full_store(tmp_path: Path, capsys) -> None:
    from sqlalchemy import create_engine

    from ltx_pipeline.store.migrate import upgrade
    from ltx_pipeline.store.revision import migrations_dir

    first = sorted(p.name.split("_", 1)[0] for p in (migrations_dir() / "versions").glob("[0-9]*_*.py"))[0]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    engine = create_engine(f"sqlite:///{workspace / 'ltx-pipeline.db'}")
    upgrade(engine, first)
    engine.dispose()
    assert StoreReader.open(workspace / "ltx-pipeline.db") is None
    assert main(["status", "--workspace", str(workspace)]) == 0
    assert StoreReader.open(workspace / "ltx-pipeline.db") is not None  # status brought it to the newest schema
