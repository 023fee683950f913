"""Workspaces the dashboard tests read: a finished simulated run (fast) and a finished demo (the browser tests).

Both are built once per test session; the demo (about 75 s of CPU) is shared by the xdist workers through
a file lock, as tests/reference_trainer shares its default project. Tests only read them: the dashboard
never writes, and tests/ui/test_pages.py checks that.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]


def _shared_root(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's root, not a user-wide one


@pytest.fixture(scope="session")
def sim_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run ``r1`` on the simulated backend: every phase, an out-of-memory trial, 40 logged steps."""
    from tests.phases.train_helpers import clips, simulated_args

    root = tmp_path_factory.mktemp("ui-sim")
    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0", "LTX_SIMULATED_STEP_LOG_EVERY": "2",
           "LTX_PIPELINE_WORKSPACE": str(root / "ws")}
    args = simulated_args(root / "ws", clips(root / "data"), "--steps", "40", "--checkpoint-interval", "20")
    done = subprocess.run([*ENGINE, *args], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "ws"


@pytest.fixture(scope="session")
def demo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ltx-pipeline demo``'s finished workspace: samples, eval renders, trials (one out of memory), reports."""
    from filelock import FileLock

    shared = _shared_root(tmp_path_factory)
    workspace = shared / "ui-demo"
    with FileLock(str(shared / "ui-demo.lock")):
        if not (shared / "ui-demo.complete").is_file():
            shutil.rmtree(workspace, ignore_errors=True)  # a build that died half-way
            done = subprocess.run([*ENGINE, "demo", "--workspace", str(workspace)], capture_output=True, text=True,
                                  timeout=600, env={**os.environ, "LTX_PIPELINE_WORKSPACE": str(workspace)})
            assert done.returncode == 0, done.stderr[-2000:]
            (shared / "ui-demo.complete").write_text("")
    return workspace


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: ``$LTX_TEST_ARTIFACTS`` when set (kept by CI), else the test's temp folder."""
    folder = Path(os.environ.get("LTX_TEST_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def served() -> Iterator[list[subprocess.Popen[str]]]:
    """A list to put started dashboard processes in: each is stopped (by its pid) when the test ends."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
