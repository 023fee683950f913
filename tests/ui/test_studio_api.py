"""The studio's API: its refusals, and its actions doing what the CLI's commands do.

Refusals: no write without this server's CSRF token and Origin, nothing outside --data-root, no write route at
all under --read-only, a stale Approve; each checked to change nothing (every file of the workspace and the
store hashed before and after), and an audit line per action that never holds the token. Actions: the same
checks and lines as the CLI, a caption edit saved atomically with the captions gate asking again, and a run
created, approved and continued through the API ending with the same run.yaml, configs and plan hash as the
same choices on the command line.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from ltx_pipeline.ui.actions.detached import Launcher
from ltx_pipeline.ui.app import create_app
from ltx_pipeline.ui.csrf import COOKIE, CsrfKeys
from ltx_pipeline.ui.run_state import captions_subject
from ltx_pipeline.workspace import Workspace
from tests.phases.train_helpers import SURFACE, clips
from tests.ui.conftest import ENGINE
from tests.ui.test_pages import snapshot

ORIGIN = "http://127.0.0.1:8188"
TOKEN = "t0k3n-" + "s" * 26


@dataclass
class Web:
    """A studio client: its TestClient, the headers a page would send, and the commands it started."""

    client: TestClient
    headers: dict[str, str]
    launcher: Launcher

    def post(self, path: str, body: dict[str, object], **headers: str) -> object:
        return self.client.post(path, json=body, headers={**self.headers, **headers})


def studio(workspace: Path, roots: list[Path] = (), token: str | None = None,  # type: ignore[assignment]
           read_only: bool = False, token_name: str | None = None) -> Web:
    app = create_app(Workspace.at(workspace), token, data_roots=roots, read_only=read_only, token_name=token_name)
    client = TestClient(app, base_url=ORIGIN)
    if token:
        client.headers["authorization"] = f"Bearer {token}"
    assert client.get("/").status_code == 200  # the first page sets the CSRF cookie
    csrf = client.cookies.get(COOKIE) or ""
    return Web(client, {"origin": ORIGIN, "x-csrf-token": csrf}, app.app.state.studio.launcher)  # type: ignore[attr-defined]


def simulated_env() -> dict[str, str]:
    return {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0"}


def _gated(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    clips(data).unlink()  # a folder of clips without captions: the prepare phase captions them (offline)
    workspace = tmp_path / "ws"
    done = subprocess.run([*ENGINE, "run", "--workspace", str(workspace), "--run", "r1", "--dataset",
                           str(data / "videos"), "--backend", "simulated", "--surface", str(SURFACE)],
                          capture_output=True, text=True, timeout=120, env=simulated_env())
    assert done.returncode == 3, done.stderr[-2000:]  # stopped at the plan gate
    return workspace, data


@pytest.fixture
def gated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(workspace, data root): run r1 on a folder of clips (simulated backend), stopped at its plan gate."""
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    return _gated(tmp_path)


@pytest.fixture(scope="module")
def gated_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``gated``, made once for the tests that prove a request changes nothing (each checks it did not)."""
    return _gated(tmp_path_factory.mktemp("studio-gated"))


def audit_rows(workspace: Path) -> list[tuple[str | None, str, str, str, str]]:
    with sqlite3.connect(workspace / "ltx-pipeline.db") as db:
        return db.execute("SELECT run, who, action, command, outcome FROM ui_audit ORDER BY id").fetchall()


def _bodies(data: Path, subject: str) -> dict[str, dict[str, object]]:
    """A body each write route would accept (so only the missing token can be what refuses it)."""
    return {"/api/studio/runs": {"run": "r2", "dataset": str(data / "videos"), "backend": "simulated",
                                 "surface": str(SURFACE)},
            "approve": {"gate": "plan", "subject": subject}, "captions": {"clip": "media/c0.mp4", "caption": "x"},
            "resume": {}, "stop": {"confirm": True}, "continue": {"steps": 5}, "remove": {"confirm": True}}


def test_every_write_route_refuses_a_request_without_its_token_or_origin_and_changes_nothing(gated_once) -> None:
    workspace, data = gated_once
    web = studio(workspace, [data])
    subject = web.client.get("/api/runs/r1").json()["gate"]["subject"]
    bodies = _bodies(data, subject)
    posts = [r for r in web.client.app.app.routes  # type: ignore[attr-defined]
             if isinstance(r, Route) and (r.methods or set()) - {"GET", "HEAD"}]
    assert len(posts) == 7 and all(r.path.startswith("/api/studio/") for r in posts)
    other_server = CsrfKeys().issue()
    refusals = [({"origin": "http://evil.example"}, "cross-origin request refused"),
                ({"origin": ""}, "cross-origin request refused"),
                ({"x-csrf-token": ""}, "missing or invalid CSRF token"),
                ({"x-csrf-token": "forged.0000"}, "missing or invalid CSRF token"),
                ({"x-csrf-token": other_server}, "missing or invalid CSRF token")]
    before = snapshot(workspace)
    for route in posts:
        path = route.path.replace("{name}", "r1")
        body = bodies[route.path if route.path == "/api/studio/runs" else route.path.rsplit("/", 1)[1]]
        for headers, error in refusals:
            answer = web.client.post(path, json=body, headers={**web.headers, **headers})
            assert answer.status_code == 403 and answer.json() == {"ok": False, "error": error}, (path, headers)
        bare = TestClient(web.client.app, base_url=ORIGIN)  # no cookie at all: a page never visited
        answer = bare.post(path, json=body, headers={"origin": ORIGIN})
        assert answer.status_code == 403 and answer.json()["error"] == "missing or invalid CSRF token"
    assert web.launcher.started == []
    assert snapshot(workspace) == before  # not a file, not a store row (not even an audit line)


def test_a_write_to_any_other_route_is_405_and_read_only_registers_no_write_route(gated_once) -> None:
    workspace, data = gated_once
    web = studio(workspace, [data], read_only=True)
    routes = web.client.app.app.routes  # type: ignore[attr-defined]
    assert not [r for r in routes if isinstance(r, Route) and (r.methods or set()) - {"GET", "HEAD"}]
    before = snapshot(workspace)
    for path in ("/", "/runs/r1", "/api/runs/r1", "/new", "/api/studio/runs", "/api/studio/runs/r1/approve",
                 "/api/studio/runs/r1/remove", "/static/ui.css"):
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = web.client.request(method, path, json={"confirm": True}, headers=web.headers)
            assert answer.status_code in (404, 405), (method, path, answer.status_code)
    assert snapshot(workspace) == before
    page = web.client.get("/runs/r1").text
    assert 'id="approve"' not in page and 'id="action-remove"' not in page
    # Without --read-only, only the studio's POST routes take anything but GET.
    writable = studio(workspace, [data])
    assert writable.client.put("/api/studio/runs/r1/remove", headers=writable.headers).status_code == 405
    assert writable.client.post("/api/runs/r1", headers=writable.headers).status_code == 405


def test_the_csrf_cookie_is_signed_per_server_readable_by_the_page_and_strict(gated_once) -> None:
    workspace, data = gated_once
    before = snapshot(workspace)
    web = studio(workspace, [data])
    fresh = TestClient(web.client.app, base_url=ORIGIN)
    cookie = fresh.get("/runs/r1").headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "samesite=strict" in cookie.lower() and "path=/" in cookie.lower()
    assert "httponly" not in cookie.lower()
    token = fresh.cookies[COOKIE]
    assert f'<meta name="csrf-token" content="{token}">' in fresh.get("/").text
    assert "set-cookie" not in fresh.get("/").headers  # a valid cookie is kept, not replaced
    other = studio(workspace, [data])  # another server (restarted): the old page's token no longer writes
    other.client.cookies.set(COOKIE, token)
    answer = other.client.post("/api/studio/runs/r1/resume", json={}, headers={**other.headers, "x-csrf-token": token})
    assert answer.status_code == 403 and snapshot(workspace) == before


def test_nothing_outside_the_data_roots_is_listed_read_or_used(gated, tmp_path: Path) -> None:
    workspace, data = gated
    outside = tmp_path / "outside"
    shutil.copytree(data / "videos", outside)
    (data / "escape").symlink_to(outside, target_is_directory=True)
    (data / "videos" / "leak.mp4").symlink_to(outside / "c0.mp4")
    web = studio(workspace, [data])
    listing = web.client.get("/api/studio/browse", params={"path": str(data)}).json()
    assert [e["name"] for e in listing["entries"]] == ["videos"]  # the link leading out is not listed
    assert "leak.mp4" not in str(web.client.get("/api/studio/browse", params={"path": str(data / "videos")}).json())
    for path in (str(outside), str(data / "escape"), f"{data}/videos/../../outside", "/", "videos"):
        answer = web.client.get("/api/studio/browse", params={"path": path})
        assert answer.status_code == 403 and answer.json()["ok"] is False, path
        assert web.client.get("/api/studio/media", params={"path": f"{path}/c0.mp4"}).status_code == 403
    assert web.client.get("/api/studio/media", params={"path": str(data / "videos" / "c0.mp4")}).status_code == 200
    before = snapshot(workspace)
    answer = web.post("/api/studio/runs", {"run": "r2", "dataset": str(data / "escape"), "backend": "simulated",
                                           "surface": str(SURFACE)})
    assert answer.status_code == 403 and "outside the data roots" in answer.json()["error"]  # type: ignore[attr-defined]
    assert web.launcher.started == [] and not (workspace / "r2").exists()
    changed = {k for k in snapshot(workspace) if snapshot(workspace)[k] != before.get(k)}
    assert changed <= {"ltx-pipeline.db", "ltx-pipeline.db-wal"}  # the audit line, nothing else
    error = answer.json()["error"]  # type: ignore[attr-defined]
    assert audit_rows(workspace) == [("r2", "loopback", "create", "", error)]  # refused before any command
    no_roots = studio(workspace, [])
    answer = no_roots.post("/api/studio/runs", {"run": "r3", "dataset": str(data / "videos")})
    assert answer.status_code == 403 and "--data-root" in answer.json()["error"]  # type: ignore[attr-defined]


def test_a_stale_approve_is_409_and_approves_nothing(gated) -> None:
    workspace, data = gated
    web = studio(workspace, [data])
    gate = web.client.get("/api/runs/r1").json()["gate"]
    assert gate["kind"] == "plan" and gate["review"] == "r1/plan.md"
    stale = {"gate": "plan", "subject": "sha256:" + "0" * 64}
    answer = web.post("/api/studio/runs/r1/approve", stale)
    assert answer.status_code == 409  # type: ignore[attr-defined]
    assert answer.json()["error"].startswith("the plan changed since this page was drawn: reload")  # type: ignore[attr-defined]
    assert web.post("/api/studio/runs/r1/approve", {"gate": "captions", "subject": gate["subject"]}).status_code == 409  # type: ignore[attr-defined]
    with sqlite3.connect(workspace / "ltx-pipeline.db") as db:
        assert db.execute("SELECT COUNT(*) FROM approvals").fetchone() == (0,)
    assert web.launcher.started == []
    rows = audit_rows(workspace)
    assert [(r[0], r[2]) for r in rows] == [("r1", "approve")] * 2
    assert rows[0][4].startswith("the plan changed") and rows[1][4].startswith("the plan changed")


def test_each_action_is_audited_with_who_and_never_the_token(gated) -> None:
    workspace, data = gated
    web = studio(workspace, [data], token=TOKEN, token_name="alice")
    subject = web.client.get("/api/runs/r1").json()["gate"]["subject"]
    assert web.post("/api/studio/runs/r1/continue", {"steps": 5}).status_code == 409  # type: ignore[attr-defined]
    assert web.post("/api/studio/runs/r1/approve", {"gate": "plan", "subject": subject}).status_code == 200  # type: ignore[attr-defined]
    web.launcher.wait(120)
    rows = audit_rows(workspace)
    assert [(r[0], r[1], r[2]) for r in rows] == [("r1", "alice", "continue"), ("r1", "alice", "approve")]
    assert rows[0][4].startswith("Run r1 has no finished training to continue") and rows[1][4] == "ok"
    assert rows[1][3] == (f"ltx-pipeline approve --workspace {workspace} --run r1 && ltx-pipeline resume "
                          f"--workspace {workspace} --run r1 --detach")
    dump = "\n".join(sqlite3.connect(workspace / "ltx-pipeline.db").iterdump())
    assert TOKEN not in dump
    shown = web.client.get("/api/runs/r1").json()["audit"]
    assert [(a["action"], a["who"], a["outcome"]) for a in shown] == [("approve", "alice", "ok"),
                                                                       ("continue", "alice", rows[0][4])]
    loopback = studio(workspace, [data])
    loopback.post("/api/studio/runs/r1/stop", {"confirm": True})
    assert audit_rows(workspace)[-1][1:3] == ("loopback", "stop")


def _live(web: Web, name: str = "r1") -> dict:
    answer = web.client.get(f"/api/runs/{name}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def _to_captions_gate(web: Web) -> dict:
    gate = _live(web)["gate"]
    assert web.post("/api/studio/runs/r1/approve", {"gate": "plan", "subject": gate["subject"]}).status_code == 200  # type: ignore[attr-defined]
    assert web.launcher.wait(120) == [3]  # resumed, prepared, stopped at the captions gate
    return _live(web)


@pytest.mark.long  # two prepare phases in detached resumes: 12 s on a busy box (2026-12-07)
def test_a_caption_edit_is_saved_atomically_and_the_captions_gate_asks_again(gated) -> None:
    workspace, data = gated
    web = studio(workspace, [data])
    view = _to_captions_gate(web)
    assert view["gate"]["kind"] == "captions" and view["gate"]["review"] == "r1/dataset/dataset.json"
    assert "plan_markdown" not in view and view["actions"] == ["remove"]
    shown = view["captions"]
    assert [c["clip"] for c in shown] == ["media/c0.mp4", "media/c1.mp4", "media/c2.mp4"]
    assert web.client.get(shown[0]["video"]).status_code == 200  # the clip plays (a link to the user's file)
    old = view["gate"]["subject"]
    folder = workspace / "r1" / "dataset"
    pasted = (folder / "dataset.json").read_text()
    (folder / "dataset.json").write_text(pasted.replace(shown[2]["caption"], "edited in an editor", 1))
    by_hand = web.post("/api/studio/runs/r1/approve", {"gate": "captions", "subject": old})
    assert by_hand.status_code == 409  # type: ignore[attr-defined]  # the store's gate is old; the file is not
    (folder / "dataset.json").write_text(pasted)
    answer = web.post("/api/studio/runs/r1/captions", {"clip": "media/c1.mp4", "caption": "a fox jumps"}).json()  # type: ignore[attr-defined]
    rows = json.loads((folder / "dataset.json").read_text())
    assert [r["caption"] for r in rows][1] == "a fox jumps" and rows[0]["caption"] == shown[0]["caption"]
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]  # written through a temp file, replaced
    assert answer["ok"] and answer["subject"] == captions_subject(folder) != old
    assert answer["command"] == f"ltx-pipeline resume --workspace {workspace} --run r1"
    assert web.launcher.wait(120) == [3]  # the prepare phase ran again, kept the edit and stopped again
    assert _live(web)["gate"] == {"kind": "captions", "subject": answer["subject"], "review": "r1/dataset/dataset.json"}
    assert json.loads((folder / "dataset.json").read_text())[1]["caption"] == "a fox jumps"
    stale = web.post("/api/studio/runs/r1/approve", {"gate": "captions", "subject": old})
    assert stale.status_code == 409  # type: ignore[attr-defined]
    missing = web.post("/api/studio/runs/r1/captions", {"clip": "media/nope.mp4", "caption": "x"})
    assert missing.status_code == 400 and "No clip 'media/nope.mp4'" in missing.json()["error"]  # type: ignore[attr-defined]


def test_new_run_input_is_refused_with_the_clis_own_line(gated) -> None:
    workspace, data = gated
    web = studio(workspace, [data])
    bad = {"run": "r2", "dataset": str(data / "videos"), "backend": "simulated", "surface": str(SURFACE),
           "mode": "nope"}
    answer = web.post("/api/studio/runs", bad)
    cli = subprocess.run([*ENGINE, "run", "--workspace", str(workspace), "--run", "r2", "--dataset",
                          str(data / "videos"), "--backend", "simulated", "--surface", str(SURFACE), "--mode", "nope"],
                         capture_output=True, text=True, timeout=60, env=simulated_env())
    assert answer.status_code == 400 and cli.returncode == 2  # type: ignore[attr-defined]
    assert cli.stderr.strip() == f"error: {answer.json()['error']}"  # type: ignore[attr-defined]
    for body, error in [({**bad, "mode": "t2v", "colour": "red"}, "Unknown field(s): colour"),
                        ({**bad, "mode": "t2v", "steps": "many"}, "steps must be int"),
                        ({**bad, "mode": "t2v", "run": "r1"}, "Run r1 already exists"),
                        ({**bad, "mode": "t2v", "config_set": ["optimization.steps=3"]},
                         "optimization.steps is set by the run itself (--set). Fix: use --steps."),
                        ({**bad, "mode": "t2v", "config_set": "seed=3"}, "config_set must be a list of text")]:
        answer = web.post("/api/studio/runs", body)
        assert answer.status_code == 400 and answer.json()["error"].startswith(error), body  # type: ignore[attr-defined]
    assert web.launcher.started == [] and not (workspace / "r2").exists()


def test_continue_resume_stop_and_remove_refuse_what_the_cli_refuses(gated) -> None:
    workspace, data = gated
    web = studio(workspace, [data])
    refused = [("continue", {"steps": 5}, 409, "Run r1 has no finished training to continue"),
               ("continue", {"steps": 0}, 400, "steps must be a whole number"),
               ("stop", {"confirm": True}, 409, "No trainer of run r1 is running"),
               ("remove", {}, 400, "Removing run r1 deletes its folder"),
               ("resume", {"apply_fix": "yes"}, 400, "apply_fix must be true or false"),
               ("resume", {"queue": 1}, 400, "queue must be true or false")]
    for action, body, status, error in refused:
        answer = web.post(f"/api/studio/runs/r1/{action}", body)
        assert answer.status_code == status and answer.json()["error"].startswith(error), action  # type: ignore[attr-defined]
    assert web.post("/api/studio/runs/nope/resume", {}).status_code == 400  # type: ignore[attr-defined]
    assert web.post("/api/studio/runs/..%2Fx/resume", {}).status_code in (400, 404)  # type: ignore[attr-defined]
    queued = web.post("/api/studio/runs/r1/resume", {"queue": True}).json()  # type: ignore[attr-defined]
    assert queued["command"] == f"ltx-pipeline resume --workspace {workspace} --run r1 --detach --queue"
    assert web.launcher.wait(120) == [3]  # back at its plan gate: the queue is met only before heavy work
    answer = web.post("/api/studio/runs/r1/remove", {"confirm": True}).json()  # type: ignore[attr-defined]
    assert answer["ok"] and answer["command"] == f"ltx-pipeline rm r1 --workspace {workspace} --yes"
    assert not (workspace / "r1").exists() and sorted(p.name for p in (data / "videos").iterdir()) == [
        "c0.mp4", "c1.mp4", "c2.mp4"]  # the user's clips untouched
    assert web.client.get("/api/runs/r1").status_code == 404
    assert audit_rows(workspace)[-1][2:] == ("remove", answer["command"], "ok")  # the record outlives the run


def _drive_to_finish(web: Web, timeout: float = 120) -> None:
    """Wait for the detached commands, then for the detached trainer; collect it with a resume from the page."""
    web.launcher.wait(timeout)
    deadline = time.monotonic() + timeout
    while (_live(web)["run"].get("training") or {}).get("state") == "running":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    if _live(web)["run"]["state"] != "finished":
        assert web.post("/api/studio/runs/r1/resume", {}).status_code == 200  # type: ignore[attr-defined]
        web.launcher.wait(timeout)
    assert _live(web)["run"]["state"] == "finished", _live(web)["run"]


def _made(workspace: Path) -> dict[str, str]:
    """run.yaml and every config the run wrote, with the workspace's path taken out; and the plan's hash."""
    files = [workspace / "r1" / "run.yaml", *sorted((workspace / "r1").rglob("config*.yaml"))]
    made = {str(p.relative_to(workspace)): p.read_text().replace(str(workspace), "WS") for p in files}
    with sqlite3.connect(workspace / "ltx-pipeline.db") as db:
        made["plan hash"] = db.execute("SELECT approval_subject FROM phase_runs WHERE phase = 'plan' "
                                       "ORDER BY id DESC").fetchone()[0]
        # The results: every logged step's loss, and the checkpoints kept.
        made["losses"] = str(db.execute("SELECT stage, step, loss FROM metrics ORDER BY stage, step").fetchall())
        made["checkpoints"] = str(db.execute("SELECT stage, step FROM checkpoints ORDER BY stage, step").fetchall())
    return made


@pytest.mark.long  # two simulated runs, each trained then continued: 51 s on a busy 2-core box (2026-12-07)
def test_a_run_made_from_the_page_equals_the_same_choices_on_the_command_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0")
    data = tmp_path / "data"
    dataset = clips(data)
    choices = ["--backend", "simulated", "--surface", str(SURFACE), "--steps", "20", "--rank", "8",
               "--checkpoint-interval", "10", "--trigger", "fx", "--autotune", "off", "--skip-eval",
               "--set", "validation.inference_steps=5", "--set", "optimization.max_grad_norm=0.5"]
    workspace = tmp_path / "ws"  # the same path both times: plan.md names it, so the plan's hash does too
    for args in (["--approve"], ["--steps", "30", "--approve"]):
        done = subprocess.run([*ENGINE, "run", "--workspace", str(workspace), "--run", "r1", "--dataset",
                               str(dataset), *choices, *args], capture_output=True, text=True, timeout=180,
                              env=simulated_env())
        assert done.returncode == 0, done.stderr[-2000:]
    on_the_command_line = _made(workspace)
    assert on_the_command_line["losses"] != "[]" and on_the_command_line["checkpoints"] != "[]"
    shutil.rmtree(workspace)
    workspace.mkdir()
    web = studio(workspace, [data])
    body = {"run": "r1", "dataset": str(dataset), "backend": "simulated", "surface": str(SURFACE), "steps": 20,
            "rank": 8, "checkpoint_interval": 10, "trigger": "fx", "autotune": "off", "skip_eval": True,
            "captioner": None, "audio": "",
            "config_set": ["validation.inference_steps=5", "optimization.max_grad_norm=0.5"]}
    created = web.post("/api/studio/runs", body).json()  # type: ignore[attr-defined]
    assert created["ok"] and "--set validation.inference_steps=5 --set optimization.max_grad_norm=0.5" in \
        created["command"]
    web.launcher.wait(120)
    gate = _live(web)["gate"]
    assert web.post("/api/studio/runs/r1/approve", {"gate": "plan", "subject": gate["subject"]}).status_code == 200  # type: ignore[attr-defined]
    _drive_to_finish(web)
    assert _live(web)["trained_steps"] == 20 and "continue" in _live(web)["actions"]
    answer = web.post("/api/studio/runs/r1/continue", {"steps": 10}).json()  # type: ignore[attr-defined]
    assert answer["command"] == f"ltx-pipeline run --workspace {workspace} --run r1 --steps 30 --approve --detach"
    _drive_to_finish(web)
    assert _live(web)["trained_steps"] == 30
    assert _made(workspace) == on_the_command_line
    assert [a["action"] for a in _live(web)["audit"]][::-1][:3] == ["create", "approve", "resume"]
