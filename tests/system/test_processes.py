"""Real engine processes: SIGKILL mid-phase then resume, two drivers at once, a light `status`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import H100_SMI

ENGINE = [sys.executable, "-c", "from ltx_pipeline.cli import main; main()"]


def engine(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([*ENGINE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def wait_for_calls(calls: Path, count: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if calls.exists() and len(calls.read_text().splitlines()) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the engine exited early: {proc.communicate()}")
        time.sleep(0.05)
    raise AssertionError(f"nvidia-smi was not called {count} times")


def status(workspace: Path) -> dict:
    done = subprocess.run([*ENGINE, "status", "--workspace", str(workspace), "--json"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["runs"][0]


def run_args(workspace: Path, dataset: Path, smi: str, prereqs: dict[str, str]) -> list[str]:
    args = ["run", "--workspace", str(workspace), "--dataset", str(dataset), "--nvidia-smi", smi, "--run", "r1"]
    for key, value in prereqs.items():
        args += ["--" + key.replace("_", "-"), value]
    return args


@pytest.mark.long  # 10.8 s per run on a 2-core box (2026-12-07): the default suite stays under 6 min
@pytest.mark.timeout(180)
def test_sigkill_mid_phase_then_resume_matches_an_uninterrupted_run(tmp_path, clips_dataset, fake_smi,
                                                                   ltx_prereqs) -> None:
    pause, calls = tmp_path / "pause", tmp_path / "calls"
    pause.touch()
    smi = fake_smi(H100_SMI, pause_file=pause, calls_file=calls, pause_from_call=2)
    killed_ws = tmp_path / "killed"
    proc = engine(*run_args(killed_ws, clips_dataset, smi, ltx_prereqs))
    wait_for_calls(calls, 2, proc)  # the fingerprint call returned; the probe's own call hangs mid-phase
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    interrupted = status(killed_ws)
    assert interrupted["state"] == "interrupted"
    assert interrupted["phases"][0]["status"] == "running"  # the stored row, reported as interrupted
    pause.unlink()

    code, out, err = finish(engine("resume", "--workspace", str(killed_ws), "--run", "r1"))
    assert code == 3, err
    assert "probe was interrupted last time" in err

    clean_ws = tmp_path / "clean"
    assert finish(engine(*run_args(clean_ws, clips_dataset, smi, ltx_prereqs)))[0] == 3
    killed, clean = status(killed_ws), status(clean_ws)
    assert killed["state"] == clean["state"] == "awaiting_approval"
    assert [(p["phase"], p["status"]) for p in killed["phases"]] == [(p["phase"], p["status"]) for p in clean["phases"]]
    assert [p["attempt"] for p in killed["phases"]] == [2, 1]
    # The provenance line names the digest of the text, which holds each workspace's own path: compared apart.
    plan_killed = (killed_ws / "r1" / "plan.md").read_text().replace(str(killed_ws.resolve()), "WS")
    plan_clean = (clean_ws / "r1" / "plan.md").read_text().replace(str(clean_ws.resolve()), "WS")
    assert _without_provenance(plan_killed) == _without_provenance(plan_clean)
    assert plan_killed.count("_Written by ltx-pipeline ") == plan_clean.count("_Written by ltx-pipeline ") == 1


@pytest.mark.timeout(180)
def test_two_drivers_on_one_run_one_wins_the_other_says_why(tmp_path, clips_dataset, fake_smi, ltx_prereqs) -> None:
    pause, calls = tmp_path / "pause", tmp_path / "calls"
    smi = fake_smi(H100_SMI, pause_file=pause, calls_file=calls, pause_from_call=2)
    workspace = tmp_path / "ws"
    assert finish(engine("init", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset)))[0] == 0
    pause.touch()
    first = engine(*run_args(workspace, clips_dataset, smi, ltx_prereqs))
    wait_for_calls(calls, 2, first)
    code, _, err = finish(engine("resume", "--workspace", str(workspace), "--run", "r1"))
    assert code == 4
    assert f"pid {first.pid}" in err and err.count("\n") == 1
    assert status(workspace)["driver"]["pid"] == first.pid
    pause.unlink()
    assert finish(first)[0] == 3


def test_status_does_not_import_torch_or_optuna(tmp_path, clips_dataset, fake_smi, ltx_prereqs) -> None:
    workspace = tmp_path / "ws"
    assert finish(engine(*run_args(workspace, clips_dataset, fake_smi(H100_SMI), ltx_prereqs)))[0] == 3
    code = ("import sys; from ltx_pipeline.cli import main; rc = main(sys.argv[1:]);"
            "heavy = sorted(m for m in ('torch', 'optuna', 'accelerate', 'peft') if m in sys.modules);"
            "print('HEAVY', heavy); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, "status", "--workspace", str(workspace)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


def _without_provenance(plan: str) -> str:
    return "\n".join(line for line in plan.splitlines() if not line.startswith("_Written by "))
