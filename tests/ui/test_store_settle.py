"""The dashboard started beside a ``run`` that is creating the store: it waits for the schema, never refuses it.

Seen in CI: ``ui`` started while the run's process was migrating a fresh store to the head schema, read it
below the head and exited with "not at this ltx-pipeline's schema". A store written in the last seconds is
waited for; an old one nobody writes is refused at once (tests/ui/test_pages.py).
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ui.source import StoreSource
from ltx_pipeline.workspace import Workspace


def _below_head(sim_workspace: Path, target: Path) -> str:
    target.mkdir()
    shutil.copy(sim_workspace / "ltx-pipeline.db", target / "ltx-pipeline.db")
    with sqlite3.connect(target / "ltx-pipeline.db") as db:
        head = db.execute("SELECT version_num FROM ltx_pipeline_alembic_version").fetchone()[0]
        db.execute("UPDATE ltx_pipeline_alembic_version SET version_num = '0006'")
    return str(head)  # the head revision, to finish the migration with


def test_a_store_reaching_the_head_while_the_dashboard_starts_is_served(sim_workspace: Path, tmp_path: Path) -> None:
    head = _below_head(sim_workspace, tmp_path / "ws")

    def finish_migrating() -> None:
        time.sleep(1.0)
        with sqlite3.connect(tmp_path / "ws" / "ltx-pipeline.db") as db:
            db.execute("UPDATE ltx_pipeline_alembic_version SET version_num = ?", (head,))

    migrator = threading.Thread(target=finish_migrating)
    migrator.start()
    started = time.monotonic()
    StoreSource(Workspace(tmp_path / "ws")).check()
    migrator.join()
    assert time.monotonic() - started >= 0.9  # it waited for the migration, then served


def test_a_store_below_the_head_that_stays_there_is_refused_after_the_wait(sim_workspace: Path,
                                                                        tmp_path: Path) -> None:
    _below_head(sim_workspace, tmp_path / "ws")
    started = time.monotonic()
    with pytest.raises(BadInput, match="not at this ltx-pipeline's schema"):
        StoreSource(Workspace(tmp_path / "ws")).check(settle_s=1.0)
    assert 0.9 <= time.monotonic() - started < 10
