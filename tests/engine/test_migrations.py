"""The schema comes only from the Alembic migrations, and they match the SQLModel metadata."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlmodel import SQLModel

from ltx_pipeline.store import Store
from ltx_pipeline.store.migrate import VERSION_TABLE, head_revision, upgrade

REPO = Path(__file__).resolve().parents[2]


def test_migrations_produce_exactly_the_models(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, SQLModel.metadata) == []
        tables = set(inspect(conn).get_table_names())
    assert VERSION_TABLE in tables and "alembic_version" not in tables
    assert {"runs", "phase_runs", "events", "approvals"} <= tables


def test_reopening_keeps_rows_and_version(tmp_path: Path) -> None:
    db = tmp_path / "ltx-pipeline.db"
    store = Store.open(db)
    run = store.create_run("keep-me", {"dataset": "/d"})
    store.record_event(run.id, "hello")
    store.close()
    store = Store.open(db)
    assert store.get_run("keep-me").request == {"dataset": "/d"}
    assert [e.message for e in store.events(run.id)] == ["hello"]
    with store.engine.connect() as conn:
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() == head_revision()
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"


@pytest.mark.slow
def test_status_runs_from_a_non_editable_wheel_in_another_directory(tmp_path: Path) -> None:
    """Build the wheel, install it (no deps) into its own folder, run `status` from elsewhere."""
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(dist), str(REPO)], check=True, capture_output=True)
    wheel = next(dist.glob("ltx_pipeline-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "ltx_pipeline/migrations/env.py" in names
    assert any(n.startswith("ltx_pipeline/migrations/versions/0001_") for n in names)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    workspace = tmp_path / "ws-wheel"
    env = {**os.environ, "PYTHONPATH": str(target)}
    code = ("import ltx_pipeline, sys; assert ltx_pipeline.__file__.startswith(sys.argv[1]), ltx_pipeline.__file__;"
            "from ltx_pipeline.store import Store; from ltx_pipeline.store.migrate import migrations_dir;"
            "assert str(migrations_dir()).startswith(sys.argv[1]); Store.open(__import__('pathlib').Path(sys.argv[2]))")
    subprocess.run([sys.executable, "-c", code, str(target), str(workspace / "ltx-pipeline.db")], cwd=elsewhere,
                   env=env, check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-c", "from ltx_pipeline.cli import main; main()", "status",
                           "--workspace", str(workspace), "--json"], cwd=elsewhere, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert '"runs": []' in done.stdout


def test_rows_seeded_at_the_first_revision_survive_every_upgrade(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(engine, "0001")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO runs (name, request, state, created_at, updated_at) "
                          "VALUES ('old', '{\"dataset\": \"/d\"}', 'awaiting_approval', '2026-01-01 00:00:00', "
                          "'2026-01-01 00:00:00')"))
        conn.execute(text("INSERT INTO phase_runs (run_id, phase, attempt, status, reason, started_at, fingerprint, "
                          "fingerprint_parts, outputs, summary, approval_blockers) VALUES (1, 'plan', 1, "
                          "'succeeded', 'first run', '2026-01-01 00:00:00', 'sha256:x', '{}', "
                          "'{\"plan_hash\": \"h\"}', 'ok', '[]')"))
    upgrade(engine)
    store = Store(engine)
    run = store.get_run("old")
    assert run.request == {"dataset": "/d"} and run.state == "awaiting_approval"
    assert store.latest_phase_runs(run.id)["plan"].outputs == {"plan_hash": "h"}
    with engine.connect() as conn:
        assert {"processes", "metrics", "checkpoints"} <= set(inspect(conn).get_table_names())
