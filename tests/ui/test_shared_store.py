"""The dashboard over a shared PostgreSQL store: the same pages, on read-only server sessions, its URL redacted.

Uses the suite's throw-away PostgreSQL server (tests/postgres.py; skipped without Debian's binaries).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from starlette.testclient import TestClient

from ltx_pipeline.store import Store
from ltx_pipeline.ui.app import create_app
from ltx_pipeline.ui.source import StoreSource
from ltx_pipeline.workspace import Workspace
from tests.phases.train_helpers import clips, simulated_args
from tests.ui.conftest import ENGINE

PASSWORD = "s3cret-pw"


@pytest.mark.long  # 11.3 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.timeout(240)
def test_a_postgresql_store_is_read_on_read_only_sessions_and_its_password_never_shown(
        store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = store_url.replace("ltx@", f"ltx:{PASSWORD}@")  # the test server trusts its socket: any password works
    workspace = tmp_path / "ws"
    env = {**os.environ, "LTX_PIPELINE_STORE": url, "LTX_SIMULATED_TIME_SCALE": "0"}
    done = subprocess.run([*ENGINE, *simulated_args(workspace, clips(tmp_path / "data"), "--steps", "20")], env=env,
                          capture_output=True, text=True, timeout=200)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.setenv("LTX_PIPELINE_STORE", url)
    web = TestClient(create_app(Workspace.at(workspace)), base_url="http://127.0.0.1:8188")
    runs = web.get("/api/runs").json()
    assert runs["store"] == url.replace(PASSWORD, "***")
    assert [(r["name"], r["state"]) for r in runs["runs"]] == [("r1", "finished")]
    for path in ("/", "/runs/r1", "/api/runs/r1"):
        page = web.get(path)
        assert page.status_code == 200 and PASSWORD not in page.text, path
    with StoreSource(Workspace.at(workspace)).open() as store:
        assert isinstance(store, Store)
        with store.engine.connect() as connection, pytest.raises(DBAPIError, match="read-only transaction"):
            connection.execute(text("UPDATE runs SET state = 'new'"))
