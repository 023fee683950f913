"""A silent trainer is shown as stalled; a failed write is reported plainly and leaves everything intact."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest

from ltx_pipeline.cli import main
from tests.phases.train_helpers import clips, simulated_args, training_registered  # noqa: F401


def status_json(workspace: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--workspace", str(workspace), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["runs"][0]


@pytest.mark.timeout(180)
def test_a_trainer_that_stops_printing_is_shown_as_stalled(tmp_path, capsys, monkeypatch,
                                                           training_registered) -> None:  # noqa: F811
    # The simulated trainer sleeps through a long "model load" (it prints nothing meanwhile).
    monkeypatch.setenv("LTX_SIMULATED_TIME_SCALE", "0.05")  # 60 s of load -> 3 s of silence
    monkeypatch.setenv("LTX_PIPELINE_STALL_SECONDS", "1")
    workspace = tmp_path / "ws"
    assert main(simulated_args(workspace, clips(tmp_path / "data"), "--steps", "40", "--detach")) == 0
    deadline = time.monotonic() + 60
    live = None
    while time.monotonic() < deadline:
        live = status_json(workspace, capsys)["training"]
        if live and live["stalled"]:
            break
        time.sleep(0.3)
    assert live is not None and live["state"] == "running" and live["stalled"], live
    assert main(["stop", "--workspace", str(workspace), "--run", "r1"]) == 0


def test_a_failed_write_is_reported_plainly_and_leaves_files_and_store_intact(tmp_path, capsys, monkeypatch,
                                                                              fake_smi, clips_dataset) -> None:
    from tests.conftest import H100_SMI

    workspace = tmp_path / "ws"
    args = ["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(clips_dataset),
            "--nvidia-smi", fake_smi(H100_SMI)]
    assert main(args) == 3
    plan = workspace / "r1" / "plan.md"
    before = plan.read_bytes()
    real_fsync = os.fsync

    def disk_full(fd: int) -> None:
        if "plan.md" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", disk_full)
    capsys.readouterr()
    code = main([*args, "--steps", "3000"])  # the plan must be rewritten
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1 and "Traceback" not in err
    # One line: what is full, where, that nothing was lost (cli.disk_full, #43 point 8).
    assert err.startswith(f"error: The disk is full (No space left on device) writing {plan}; nothing was lost"), err
    assert plan.read_bytes() == before  # the old plan is intact
    assert not [p for p in plan.parent.iterdir() if p.name.endswith(".tmp")]  # no half-written file left
    monkeypatch.setattr(os, "fsync", real_fsync)
    run = status_json(workspace, capsys)
    plan_row = next(p for p in run["phases"] if p["phase"] == "plan")
    assert plan_row["status"] == "failed" and "No space left" in plan_row["error"]
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 3  # space back: it continues
