"""SIGKILL of the engine inside each phase, then `resume`: the same final state as an uninterrupted run.

The engine runs as a real process on the simulated backend. A `sitecustomize` module put on its
PYTHONPATH (test code, not the product) holds the engine inside the chosen phase, right after that
phase's attempt was committed as running, and tells the test, which then kills the whole process
group. Nothing may be lost or duplicated: metrics, trials, checkpoints, launches, events.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.hold_hook import HOLD
from tests.phases.train_helpers import SURFACE, clips

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]
PHASES = ["probe", "plan", "data_check", "config_patch", "validate", "autotune", "train", "monitor", "evaluate"]



def run_args(workspace: Path, dataset: Path) -> list[str]:
    return ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), "--backend", "simulated",
            "--surface", str(SURFACE), "--steps", "60", "--checkpoint-interval", "20", "--approve"]


def final_state(workspace: Path) -> dict:
    done = subprocess.run([*ENGINE, "status", "--workspace", str(workspace), "--json"], capture_output=True,
                          text=True, timeout=120)
    run = json.loads(done.stdout)["runs"][0]
    db = sqlite3.connect(workspace / "ltx-pipeline.db")
    metrics = db.execute("SELECT stage, step, loss FROM metrics ORDER BY stage, step").fetchall()
    checkpoints = db.execute("SELECT stage, step FROM checkpoints ORDER BY stage, step").fetchall()
    launches = db.execute("SELECT kind, COUNT(*) FROM processes WHERE kind = 'train' GROUP BY kind").fetchall()
    events = db.execute("SELECT message FROM events WHERE message LIKE 'launched train%'").fetchall()
    trials = sqlite3.connect(workspace / "optuna.db").execute(
        "SELECT state, COUNT(*) FROM trials GROUP BY state ORDER BY state").fetchall()
    return {"state": run["state"], "phases": [(p["phase"], p["status"]) for p in run["phases"]],
            "metrics": metrics, "checkpoints": checkpoints, "train_launches": launches,
            "launch_events": len(events), "trials": trials,
            "winner": (run.get("autotune") or {}).get("winner")}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("clean")
    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0"}
    done = subprocess.run([*ENGINE, *run_args(root / "ws", clips(root / "data"))], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    return final_state(root / "ws")


@pytest.mark.long  # 13 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("phase", PHASES)
def test_sigkill_inside_a_phase_then_resume_ends_as_an_uninterrupted_run(tmp_path, uninterrupted, phase) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOLD)
    marker = tmp_path / "held"
    env = {**os.environ, "LTX_SIMULATED_TIME_SCALE": "0", "HOLD_IN_PHASE": phase, "HOLD_MARKER": str(marker),
           "PYTHONPATH": os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")])}
    workspace = tmp_path / "ws"
    proc = subprocess.Popen([*ENGINE, *run_args(workspace, clips(tmp_path / "data"))], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while not marker.exists():
        assert proc.poll() is None, proc.stderr.read()[-1500:]
        assert time.monotonic() < deadline, f"the engine never entered {phase}"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    clean_env = {k: v for k, v in env.items() if k != "HOLD_IN_PHASE"}
    # --approve again: the original `run --approve` approved nothing yet when killed before the plan.
    done = subprocess.run([*ENGINE, "resume", "--workspace", str(workspace), "--run", "r1", "--approve"], env=clean_env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-1500:]
    assert f"{phase} was interrupted last time" in done.stderr
    assert final_state(workspace) == uninterrupted
