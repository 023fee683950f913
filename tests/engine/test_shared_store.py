"""The store on a real PostgreSQL server, as a team shares it: migrations, a whole run, two hosts contending.

The server is started by the suite itself (``postgres_server`` in conftest.py: Debian's ``postgresql`` binaries,
which ``.ci/run`` installs when they are missing; as root the server runs as the package's ``postgres``
user), one database per test. The same SQLModel models and Alembic migrations run here as on SQLite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.hold_hook import HOLD
from tests.phases.train_helpers import clips, simulated_args
from tests.postgres import new_database

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]



def _schema_drift(url: str) -> list:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine
    from sqlmodel import SQLModel

    import ltx_pipeline.store.models  # noqa: F401 - the tables
    from ltx_pipeline.store.revision import VERSION_TABLE

    engine = create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "version_table": VERSION_TABLE})
        drift = compare_metadata(context, SQLModel.metadata)
    engine.dispose()
    return drift


def test_migrations_run_on_postgresql_from_empty_and_from_0001(store_url: str, postgres_server: Path) -> None:
    from sqlalchemy import create_engine

    from ltx_pipeline.store import Store
    from ltx_pipeline.store.migrate import current_revision, upgrade
    from ltx_pipeline.store.revision import head_revision

    store = Store.open(store_url)
    assert store.is_postgres and current_revision(store.engine) == head_revision()
    assert _schema_drift(store_url) == []  # exactly the models' schema
    run = store.create_run("r1", {"dataset": "x"})
    assert store.get_run("r1").id == run.id
    store.close()
    older = new_database(postgres_server)
    engine = create_engine(older)
    upgrade(engine, "0001")
    assert current_revision(engine) == "0001"
    engine.dispose()
    Store.open(older).close()  # from 0001 to the newest
    assert _schema_drift(older) == []


def test_a_whole_run_on_the_shared_store_keeps_nothing_in_the_workspace_file(store_url: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    from ltx_pipeline.store import Store
    from ltx_pipeline.store.location import optuna_storage

    monkeypatch.setenv("LTX_PIPELINE_STORE", store_url)
    workspace = tmp_path / "ws"
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "20", "--skip-eval")) == 0
    assert not (workspace / "ltx-pipeline.db").exists() and not (workspace / "optuna.db").exists()
    store = Store.open(store_url)
    assert store.get_run("r1").state == "finished"
    assert set(store.latest_phase_runs(store.get_run("r1").id)) >= {"autotune", "train", "monitor", "evaluate"}
    study = optuna.load_study(study_name="r1-autotune", storage=optuna_storage(store_url, workspace / "optuna.db"))
    assert study.trials and study.user_attrs.get("finished") is True
    autotune = store.latest_phase_runs(store.get_run("r1").id)["autotune"].outputs
    assert autotune["storage"].startswith("postgresql+psycopg://ltx@/")  # shown, never with a password
    done = subprocess.run([*ENGINE, "status", "--workspace", str(workspace), "--json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"][0]["state"] == "finished"


@pytest.mark.long  # 10.6 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
def test_two_engines_on_two_hosts_contend_for_a_run_and_the_second_names_the_first(store_url: str,
                                                                                   tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOLD)
    marker = tmp_path / "held"
    base = {**os.environ, "LTX_PIPELINE_STORE": store_url, "LTX_SIMULATED_TIME_SCALE": "0",
            "PYTHONPATH": os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")])}
    host_a, host_b = tmp_path / "host-a" / "ws", tmp_path / "host-b" / "ws"
    first = subprocess.Popen([*ENGINE, *simulated_args(host_a, clips(tmp_path / "data"), "--steps", "20")],
                             env={**base, "LTX_PIPELINE_HOST_ID": "host-a", "HOLD_IN_PHASE": "data_check",
                                  "HOLD_MARKER": str(marker)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert first.poll() is None, first.stderr.read().decode()[-1500:]
            assert time.monotonic() < deadline, "the first engine never reached data_check"
            time.sleep(0.05)
        # The second host has its own workspace folder (its own flock file) and the run's run.yaml.
        (host_b / "r1").mkdir(parents=True)
        shutil.copy(host_a / "r1" / "run.yaml", host_b / "r1" / "run.yaml")
        env_b = {**base, "LTX_PIPELINE_HOST_ID": "host-b"}
        second = subprocess.run([*ENGINE, "resume", "--workspace", str(host_b), "--run", "r1"], env=env_b,
                                capture_output=True, text=True, timeout=120)
        assert second.returncode == 4, second.stderr
        assert f"pid {first.pid} on host-a since " in second.stderr and second.stderr.count("\n") == 1
        status = subprocess.run([*ENGINE, "status", "--workspace", str(host_b), "--json"], env=env_b,
                                capture_output=True, text=True, timeout=120)
        driver = json.loads(status.stdout)["runs"][0]["driver"]
        assert driver["host"] == "host-a" and driver["pid"] == first.pid
    finally:
        os.killpg(first.pid, 9)
        first.wait(timeout=30)
    # The holder died: the server dropped its lock, and the other host may drive the run now.
    status = subprocess.run([*ENGINE, "status", "--workspace", str(host_b), "--json"], env=env_b,
                            capture_output=True, text=True, timeout=120)
    assert json.loads(status.stdout)["runs"][0]["driver"] is None


def test_a_supervisor_on_a_shared_store_writes_its_heartbeat(store_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from ltx_pipeline.backends.base import LaunchSpec
    from ltx_pipeline.engine.journal import RunJournal
    from ltx_pipeline.engine.processes import heartbeat_fresh
    from ltx_pipeline.store import Store

    monkeypatch.setenv("LTX_PIPELINE_STORE", store_url)
    monkeypatch.setenv("LTX_PIPELINE_HEARTBEAT_S", "0.2")
    store = Store.open(store_url)
    run = store.create_run("r1", {})
    journal = RunJournal(store, run.id, "train")
    handle = journal.launch("preprocess", 0, LaunchSpec((sys.executable, "-c", "import time; time.sleep(4)"),
                                                        tmp_path), tmp_path / "work.log")
    deadline = time.monotonic() + 10
    while (beat := store.processes(run.id)[0].heartbeat_at) is None:
        assert time.monotonic() < deadline, "no heartbeat reached the store"
        time.sleep(0.1)
    assert heartbeat_fresh(beat)
    journal.wait(handle, timeout_s=30)


def test_status_on_another_host_shows_a_stale_heartbeat_as_lost_never_running(store_url: str,
                                                                              tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    from ltx_pipeline.store import Process, Store

    store = Store.open(store_url)
    run = store.create_run("r1", {"dataset": str(tmp_path / "data.json"), "backend": "simulated"})
    log = tmp_path / "ws" / "r1" / "logs" / "train.log"
    log.parent.mkdir(parents=True)
    log.write_text("INFO     Step 20/100 - Loss: 0.5000, LR: 1.00e-04, Time/Step: 1.00s, Total Time: 0h 2m\n")
    row = store.add_process(Process(run_id=run.id, phase="train", kind="train", stage=1, pid=4242, create_time=0.0,
                                    host="host-a", argv=[], cwd="/", env={}, printable="train", log_path=str(log),
                                    status="running",
                                    heartbeat_at=datetime.now(timezone.utc) - timedelta(minutes=5)))
    env = {**os.environ, "LTX_PIPELINE_STORE": store_url, "LTX_PIPELINE_HOST_ID": "host-b"}

    def training_state() -> str:
        done = subprocess.run([*ENGINE, "status", "--workspace", str(tmp_path / "ws"), "--json"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["runs"][0]["training"]["state"]

    assert training_state() == "lost"  # five minutes without a heartbeat: not running, whatever the row says
    store.update_process(row.id, heartbeat_at=datetime.now(timezone.utc))
    assert training_state() == "running"
