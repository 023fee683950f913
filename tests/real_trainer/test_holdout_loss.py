"""Holdout loss per checkpoint on the official trainer (#45), in one cheap run (the suite's time budget).

Four real clips, ``--holdout 1``, 4 steps with a checkpoint every 2, ``--skip-eval`` (the renders are another
test's): the evaluate phase measures step 0 (the base, adapter disabled) and every kept checkpoint with
``trainer_side/holdout_loss.py`` under the trainer's interpreter, on the held-out clip's latents and on training
rows. The measurement is SIGKILLed (the engine and the script) right after its first checkpoint is written, then
``resume`` measures only the two missing ones. Checked: the figures file has step 0 and every checkpoint,
checkpoints give different figures, measuring again from scratch gives identical figures (fixed sigmas and seeds),
and the held-out clip is nowhere in what train.py trained on (its preprocessed folder) while its latents are in the
run's holdout folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.hold_hook import HOLD_HOLDOUT_RESULTS
from tests.real_trainer.conftest import NO_STEP_ZERO, THREADS, cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer

SCRIPT = Path(__file__).resolve().parents[2] / "ltx_pipeline" / "trainer_side" / "holdout_loss.py"


def _run_killed_mid_measurement(args: list[str], tmp_path: Path) -> None:
    """``run`` until the holdout-loss script has written its first checkpoint's figures; then SIGKILL the engine and
    the script (a machine that lost power: nothing re-attaches, the script must start again)."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOLD_HOLDOUT_RESULTS)
    marker = tmp_path / "measuring.pid"
    path = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **THREADS, "PYTHONPATH": path, "HOLD_HOLDOUT_MARKER": str(marker)}
    log = (tmp_path / "engine.log").open("w")
    engine = subprocess.Popen([sys.executable, "-m", "ltx_pipeline.cli", *args], stdout=log, stderr=subprocess.STDOUT,
                              env=env)
    deadline = time.monotonic() + 1200
    while not marker.is_file() and engine.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    engine.kill()
    engine.wait()
    log.close()
    assert marker.is_file(), (tmp_path / "engine.log").read_text()[-4000:]
    time.sleep(0.2)  # the pid is written before the sleep starts
    os.kill(int(marker.read_text()), signal.SIGKILL)


def _figures(entries: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    return [(e["step"], e["holdout"], e["train"]) for e in entries]


def test_holdout_loss_per_checkpoint_is_measured_deterministically_on_rows_never_trained_on(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 4, audio=False, metadata=False)
    workspace = tmp_path / "ws"
    args = run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r1", "--approve",
                    "--skip-eval", "--holdout", "1", "--steps", "4", "--checkpoint-interval", "2",
                    "--validation-interval", "100", "--captioner", "offline", *NO_STEP_ZERO)
    _run_killed_mid_measurement(args, tmp_path)
    run = workspace / "r1"
    killed = json.loads((run / "holdout" / "results.json").read_text())["checkpoints"]
    assert [e["step"] for e in killed] == [0]  # the script died measuring its second checkpoint
    log = run / "logs" / "holdout_loss.log"
    before = log.read_text().count("LTX_PIPELINE_HOLDOUT ")
    done = cli("resume", "--workspace", str(workspace), "--run", "r1", "--approve")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "Holdout loss: measuring 2 of 3 checkpoint(s)" in done.stdout + done.stderr
    measured_again = [json.loads(line.split("LTX_PIPELINE_HOLDOUT ", 1)[1])
                      for line in log.read_text().splitlines() if "LTX_PIPELINE_HOLDOUT " in line][before:]
    assert "loaded_s" in measured_again[0] and [e["step"] for e in measured_again[1:]] == [2, 4]  # step 0 kept
    rows = json.loads((run / "outputs" / "holdout-loss.json").read_text())
    checkpoints = sorted((run / "outputs" / "checkpoints").glob("lora_weights_step_*.safetensors"))
    assert [r["step"] for r in rows] == [0, 2, 4]
    assert [r["checkpoint"] for r in rows] == [None, *map(str, checkpoints)]
    assert all(r["holdout"]["samples"] == 1 and r["train"]["samples"] == 3 for r in rows)
    assert all(r["holdout"]["audio"] is None for r in rows)  # video only: no audio figure, not a zero
    assert len({r["holdout"]["total"] for r in rows}) == 3, rows  # each checkpoint's weights, their own figure
    assert (run / "outputs" / "holdout_loss.png").stat().st_size > 0
    summary = (run / "outputs" / "run-summary.md").read_text()
    lowest = min(rows, key=lambda r: (r["holdout"]["total"], r["step"]))
    assert f"The lowest holdout loss was measured at step {lowest['step']} " in summary
    status = json.loads(cli("status", "--workspace", str(workspace), "--run", "r1", "--json").stdout)
    assert status["runs"][0]["holdout_loss"]["lowest"]["step"] == lowest["step"]

    # Measured again from scratch (its own results file): the same figures, exactly.
    job = json.loads((run / "holdout" / "job.json").read_text())
    job["results"] = str(tmp_path / "again.json")
    (tmp_path / "job.json").write_text(json.dumps(job))
    again = subprocess.run([str(trainer_env.python), str(SCRIPT), str(tmp_path / "job.json")], capture_output=True,
                           text=True, timeout=900, check=False, env={**THREADS, "PATH": "/usr/bin:/bin"})
    assert again.returncode == 0, again.stderr[-3000:]
    remeasured = json.loads((tmp_path / "again.json").read_text())["checkpoints"]
    assert _figures(remeasured) == _figures(json.loads((run / "holdout" / "results.json").read_text())["checkpoints"])

    # The held-out clip: in the holdout's latents, nowhere in what train.py trained on.
    held = [json.loads(line)["video"] for line in (run / "dataset" / "holdout.jsonl").read_text().splitlines()]
    assert len(held) == 1
    stem = Path(held[0]).stem
    trained_on = [p.name for p in (run / "dataset" / ".precomputed" / "latents").rglob("*.pt")]
    assert len(trained_on) == 3 and not any(stem in name for name in trained_on), (stem, trained_on)
    assert [p.stem for p in (run / "holdout" / ".precomputed" / "latents").rglob("*.pt")] == [stem]
