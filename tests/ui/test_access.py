"""Who gets what: files only from inside the workspace, the token on every request, one line for bad options.

The file route resolves symlinks before it judges a path, lists no folder and serves only media and
report kinds (never a log or the database); a video answers Range requests so a browser can seek.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ltx_pipeline.ui.access import COOKIE
from ltx_pipeline.ui.app import create_app
from ltx_pipeline.workspace import Workspace
from tests.conftest import mp4_bytes
from tests.ui.conftest import ENGINE

TOKEN = "t0k3n-" + "x" * 26


@pytest.fixture
def media_workspace(tmp_path: Path) -> Path:
    """A workspace with a sample video, a report, a log, a database and links leading out of it."""
    ws = tmp_path / "ws"
    samples = ws / "r1" / "outputs" / "samples"
    samples.mkdir(parents=True)
    (samples / "step_000010_1.mp4").write_bytes(mp4_bytes(frames=25))
    (ws / "r1" / "plan.md").write_text("# Plan\n")
    (ws / "r1" / "logs").mkdir()
    (ws / "r1" / "logs" / "train.log").write_text("secret=hunter2\n")
    (ws / "ltx-pipeline.db").write_bytes(b"SQLite format 3\x00")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# not yours\n")
    (ws / "r1" / "escape.md").symlink_to(outside / "secret.md")
    (ws / "r1" / "out").symlink_to(outside, target_is_directory=True)
    (ws / "r1" / "inside.md").symlink_to(ws / "r1" / "plan.md")
    return ws


def client(workspace: Path, token: str | None = None, host: str = "127.0.0.1:8188") -> TestClient:
    return TestClient(create_app(Workspace.at(workspace), token), base_url=f"http://{host}")


@pytest.mark.parametrize("path", [
    "/files/r1/escape.md",  # a symlink out of the workspace
    "/files/r1/out/secret.md",  # through a linked folder
    "/files/r1/%2e%2e/%2e%2e/outside/secret.md",  # dot segments, encoded so the client keeps them
    "/files/..%2f..%2foutside%2fsecret.md",
    "/files/%2Fetc%2Fpasswd",
    "/files/r1",  # a folder: no listing
    "/files/r1/outputs/samples/",
    "/files/r1/logs/train.log",  # not a kind the dashboard serves
    "/files/ltx-pipeline.db",
    "/files/r1/missing.mp4",
])
def test_nothing_outside_the_workspace_and_no_listing_or_log_is_served(media_workspace: Path, path: str) -> None:
    answer = client(media_workspace).get(path)
    assert answer.status_code == 404, answer.text
    assert "not yours" not in answer.text and "hunter2" not in answer.text


def test_files_inside_the_workspace_are_served_and_videos_seek(media_workspace: Path) -> None:
    web = client(media_workspace)
    assert web.get("/files/r1/inside.md").text == "# Plan\n"  # a link that stays inside is fine
    plan = web.get("/files/r1/plan.md")
    assert plan.headers["content-type"].startswith("text/plain") and plan.headers["x-content-type-options"] == "nosniff"
    size = (media_workspace / "r1" / "outputs" / "samples" / "step_000010_1.mp4").stat().st_size
    part = web.get("/files/r1/outputs/samples/step_000010_1.mp4", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and len(part.content) == 100
    assert part.headers["content-range"] == f"bytes 100-199/{size}" and part.headers["content-type"] == "video/mp4"


def test_with_a_token_every_request_needs_it(media_workspace: Path) -> None:
    web = client(media_workspace, TOKEN, host="203.0.113.7:8188")
    for path in ("/", "/api/runs", "/files/r1/plan.md", "/static/ui.css", "/nothing"):
        assert web.get(path).status_code == 401, path
    assert web.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert web.get("/?token=wrong").status_code == 401
    assert web.get("/files/r1/plan.md", headers={"Authorization": f"Bearer {TOKEN}"}).text == "# Plan\n"
    # The token once in the URL: a cookie, and a redirect that drops it from the address.
    first = web.get(f"/files/r1/plan.md?token={TOKEN}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/files/r1/plan.md"
    assert COOKIE in first.cookies and "httponly" in first.headers["set-cookie"].lower()
    assert web.get("/files/r1/plan.md").text == "# Plan\n"  # the client kept the cookie


def test_without_a_token_only_loopback_names_are_answered(media_workspace: Path) -> None:
    assert client(media_workspace, host="localhost:8188").get("/files/r1/plan.md").status_code == 200
    assert client(media_workspace, host="[::1]:8188").get("/files/r1/plan.md").status_code == 200
    # A page whose DNS name was rebound to 127.0.0.1 still sends its own name as Host.
    assert client(media_workspace, host="evil.example:8188").get("/files/r1/plan.md").status_code == 403


def test_pages_may_not_be_framed_and_keep_their_address_to_themselves(media_workspace: Path) -> None:
    headers = client(media_workspace).get("/").headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["referrer-policy"] == "no-referrer" and headers["x-frame-options"] == "DENY"


def _ui(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINE, "ui", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_bad_options_get_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    cases = {
        ("--workspace", str(tmp_path / "absent")): f"error: No workspace at {tmp_path / 'absent'} (--workspace).",
        ("--workspace", str(tmp_path / "ws"), "--port", "70000"): "error: Port 70000 is not a TCP port (--port).",
        ("--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0", "--token", "short"):
            "error: The token is shorter than 16 characters (--token).",
        ("--workspace", str(tmp_path / "ws"), "--host", "no-such-host.invalid"): "error: Cannot listen on",
    }
    for args, start in cases.items():
        done = _ui(*args)
        assert done.returncode == 2 and done.stderr.startswith(start), (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and " Fix: " in done.stderr and done.stdout == ""


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        done = _ui("--workspace", str(tmp_path / "ws"), "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2 and done.stderr.startswith("error: Cannot listen on 127.0.0.1:"), done.stderr
    assert "choose another --port" in done.stderr


@contextmanager
def _dashboard(*args: str, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[str]]:
    """`ltx-pipeline ui ARGS` as a process, killed at the end whatever the test saw (no server outlives it)."""
    proc = subprocess.Popen([*ENGINE, "ui", *args], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def test_ctrl_c_stops_the_dashboard_cleanly(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    with _dashboard("--workspace", str(tmp_path / "ws"), "--port", "0") as proc:
        assert proc.stdout is not None and proc.stdout.readline().startswith("Serving ")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out.splitlines()[-1], err) == (0, "Stopped.", "")


def test_the_token_may_come_from_the_environment_and_stays_out_of_the_command_line(tmp_path: Path) -> None:
    """A --token on the command line is visible to every local user in `ps`; LTX_PIPELINE_UI_TOKEN is not."""
    (tmp_path / "ws").mkdir()
    token = "env-token-0123456789abcdef"
    args = ("--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0", "--port", "0")
    with _dashboard(*args, env={"LTX_PIPELINE_UI_TOKEN": token}) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert first.startswith("Serving ") and f"?token={token}" in first, first
    assert token not in " ".join(args)
    short = subprocess.run([*ENGINE, "ui", "--workspace", str(tmp_path / "ws"), "--host", "0.0.0.0"],
                           capture_output=True, text=True, timeout=60,
                           env={**os.environ, "LTX_PIPELINE_UI_TOKEN": "short"})
    assert short.returncode == 2 and "The token is shorter than 16 characters" in short.stderr
