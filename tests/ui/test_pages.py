"""The dashboard's pages and JSON, in process (Starlette's TestClient), over a finished simulated run.

One reader, two views: ``/api/runs`` is ``status --json``'s dict. The run page shows the phases, the
config with its patches' reasons on their lines, the trials with a failed one's reason, and the curves'
data; nothing a request does changes the store, and a store at another schema is refused, not upgraded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ltx_pipeline.ui.app import create_app
from ltx_pipeline.workspace import Workspace
from tests.ui.conftest import ENGINE


def client(workspace: Path, token: str | None = None) -> TestClient:
    # TestClient's default Host is "testserver"; a loopback dashboard answers only to a loopback name.
    return TestClient(create_app(Workspace.at(workspace), token), base_url="http://127.0.0.1:8188")


def snapshot(workspace: Path) -> dict[str, tuple[int, str]]:
    """Every file in the workspace, with its mtime and content digest.

    Bar SQLite's ``-shm``: the WAL index every reader of a WAL database maps and marks (``status`` too), which
    holds no data; and an empty ``-wal``, which the first reader of a store whose writer closed it cleanly
    creates (the test failed alone, passing only where an earlier request had made it). The database and a
    ``-wal`` holding anything are compared.
    """
    return {str(p.relative_to(workspace)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(workspace.rglob("*")) if p.is_file() and not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


def test_the_runs_json_is_status_json(sim_workspace: Path) -> None:
    status = subprocess.run([*ENGINE, "status", "--workspace", str(sim_workspace), "--json"], capture_output=True,
                            text=True, timeout=120, check=True)
    served = client(sim_workspace).get("/api/runs").json()
    expected = json.loads(status.stdout)
    assert served.pop("store") == str(sim_workspace / "ltx-pipeline.db")
    assert served == expected
    assert [r["name"] for r in served["runs"]] == ["r1"] and served["runs"][0]["state"] == "finished"


def test_the_runs_page_lists_the_run_and_the_run_page_shows_each_part(sim_workspace: Path) -> None:
    web = client(sim_workspace)
    runs = web.get("/")
    assert runs.status_code == 200 and '"name": "r1"' in runs.text
    page = web.get("/runs/r1")
    assert page.status_code == 200
    data = json.loads(page.text.split('id="page-data">', 1)[1].split("</script>", 1)[0])
    assert [p["phase"] for p in data["run"]["phases"]][:2] == ["probe", "plan"]
    # The config: each recorded patch on its line, with its reason beside it.
    config = data["configs"][0]
    steps = next(p for p in config["patches"] if p["path"] == "optimization.steps")
    assert config["lines"][steps["line"] - 1]["text"].strip().startswith("steps: 40")
    assert f'class="line patched"><span class="n">{steps["line"]}</span>' in page.text
    assert steps["reason"] in page.text
    # The sweep: the out-of-memory trial with its reason, marked failed; the fitting one on the chart.
    trials = data["autotune"]["trials"]
    oom = next(t for t in trials if t["outcome"].startswith("oom"))
    assert oom["failed"] and "out of memory" in oom["reason"]
    assert '<tr class="failed">' in page.text and "CUDA out of memory" in page.text
    assert f'<span class="bad">#{oom["number"]} {oom["outcome"]}</span>' in page.text  # named under the chart
    assert [p["label"] for p in data["autotune"]["points"]] == [f"#{t['number']}" for t in trials if t["fits"]]
    assert data["autotune"]["limit_gb"] is not None and data["autotune"]["dashboard"].startswith("optuna-dashboard")
    # The loss curve's points are the logged steps (every 2 of 40).
    series = data["series"][0]
    assert series["steps"] == list(range(2, 41, 2)) and all(loss is not None for loss in series["loss"])
    # The reports, rendered (raw HTML off), and the evaluation (the simulated backend writes no render files).
    assert [d["name"] for d in data["documents"]] == ["plan.md", "autotune.md", "run-summary.md"]
    assert "<h1>Training plan: r1</h1>" in page.text
    assert data["evaluation"]["state"] == "rendered" and "no file in the workspace" in page.text


def test_the_live_json_has_the_run_its_curves_and_samples(sim_workspace: Path) -> None:
    live = client(sim_workspace).get("/api/runs/r1").json()
    assert live["run"]["name"] == "r1" and live["run"]["training"]["step"] == 40
    assert live["series"][0]["steps"][-1] == 40
    assert live["samples"] == [{"stage": 1, "prompts": live["samples"][0]["prompts"], "steps": [],
                                "contact_sheet": None}]


@pytest.mark.parametrize("path", ["/runs/nope", "/runs/.r1", "/runs/a..b", "/runs/a%2F..%2F..", "/api/runs/nope",
                                  "/nothing"])
def test_an_unknown_run_or_route_is_404(sim_workspace: Path, path: str) -> None:
    assert client(sim_workspace).get(path).status_code == 404


def test_no_request_changes_the_store_or_any_file(sim_workspace: Path) -> None:
    before = snapshot(sim_workspace)
    web = client(sim_workspace)
    for path in ("/", "/runs/r1", "/api/runs", "/api/runs/r1", "/files/r1/plan.md", "/files/r1/config.yaml"):
        assert web.get(path).status_code == 200, path
    assert snapshot(sim_workspace) == before


def test_a_store_at_another_schema_is_refused_and_left_as_it_is(sim_workspace: Path, tmp_path: Path) -> None:
    old = tmp_path / "ws"
    old.mkdir()
    shutil.copy(sim_workspace / "ltx-pipeline.db", old / "ltx-pipeline.db")
    with sqlite3.connect(old / "ltx-pipeline.db") as db:
        db.execute("UPDATE ltx_pipeline_alembic_version SET version_num = '0001'")
    for name in ("ltx-pipeline.db", "ltx-pipeline.db-wal"):  # an old store: nobody has written it for a day
        if (old / name).exists():
            os.utime(old / name, (time.time() - 86400, time.time() - 86400))
    before = snapshot(old)
    answer = client(old).get("/api/runs")
    assert answer.status_code == 503
    assert "is not at this ltx-pipeline's schema" in answer.text and "ltx-pipeline status" in answer.text
    assert snapshot(old) == before  # never migrated
    done = subprocess.run([*ENGINE, "ui", "--workspace", str(old), "--port", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.startswith("error: The store ") and done.stdout == ""


def test_an_empty_workspace_shows_no_runs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    web = client(tmp_path / "empty")
    assert web.get("/api/runs").json()["runs"] == []
    assert "No runs in this workspace yet" in web.get("/").text


def test_a_failed_run_shows_what_failed_and_the_fix(tmp_path: Path) -> None:
    from tests.phases.train_helpers import clips, simulated_args

    dataset = clips(tmp_path / "data")
    rows = json.loads(dataset.read_text())
    rows[1]["video"] = "videos/missing.mp4"
    dataset.write_text(json.dumps(rows))
    done = subprocess.run([*ENGINE, *simulated_args(tmp_path / "ws", dataset)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    web = client(tmp_path / "ws")
    assert web.get("/api/runs").json()["runs"][0]["state"] == "failed"
    page = web.get("/runs/r1").text
    failure = page.split('<section class="failure" id="failure">', 1)[1].split("</section>", 1)[0]
    assert "<h2>Failure in probe</h2>" in failure and "missing.mp4: no such file" in failure
    assert "<b>Fix:</b> replace or remove those files (or their rows), then run again." in failure
    assert "ltx-pipeline resume --workspace" in failure  # the next command, as status gives it
