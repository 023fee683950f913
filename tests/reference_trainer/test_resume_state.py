"""Resume restores what ltx-trainer's ``_restore_training_state`` restores: optimizer, scheduler, RNG.

The learning rate is the witness. A "full" state carries the optimizer (whose param groups hold their
``lr``), so a run SIGKILLed after a checkpoint and resumed from it logs, at every step, the learning rate
the uninterrupted run logs. A "minimal" state (the trainer's default) carries the scheduler's position
but no optimizer: the trainer's chained schedulers then scale the configured rate from the resumed step
on, and the toy must show that very schedule, not a better one. Losses are not compared: the trainer
does not restore its data loader, so a resume is not bit-for-bit the uninterrupted run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from conftest import REPO, train_in_process

from ltx_pipeline.checkpoints.files import resume_restores

LR_LINE = re.compile(r"Step (\d+)/\d+ - Loss: \S+, LR: (\S+),")
STEPS, INTERVAL, LR = 12, 4, 1e-4
RESTORED = ("Restored optimizer state (full mode)", "Restored LR scheduler state", "Restored RNG states")


def _lrs(out: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in LR_LINE.finditer(out)}


def _config(project, name: str, state: str, **model: str) -> Path:  # noqa: ANN001
    return project.config(f"{name}.yaml", output_dir=str(project.root / name),
                          optimization={"steps": STEPS, "learning_rate": LR},
                          checkpoints={"interval": INTERVAL, "keep_last_n": -1, "save_training_state": state},
                          model=model)


def _killed_after(config: Path, step: int) -> str:
    """Run the trainer as a process and SIGKILL it once it logs ``Step {step}/``; returns what it printed."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", "LTX_REFERENCE_DEVICE": "cpu",
           "LTX_REFERENCE_LOG_EVERY": "1"}
    env.pop("LOCAL_RANK", None)
    argv = [sys.executable, "-m", "ltx_pipeline.reference_trainer", str(config), "--disable-progress-bars"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=config.parent)
    watchdog = threading.Timer(60, proc.kill)  # a trainer that hangs must not hang the suite
    watchdog.start()
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if f"Step {step}/" in line:
                os.kill(proc.pid, signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "".join(lines[-20:])
    return "".join(lines)


def test_a_full_state_resume_after_sigkill_logs_the_uninterrupted_learning_rate_at_every_step(
        project, capsys, monkeypatch):
    code, whole = train_in_process(_config(project, "whole", "full"), capsys, monkeypatch=monkeypatch)
    assert code == 0
    killed = _killed_after(_config(project, "killed", "full"), INTERVAL + 2)
    folder = project.root / "killed" / "checkpoints"
    code, out = train_in_process(_config(project, "resumed", "full", load_checkpoint=str(folder)), capsys,
                                 monkeypatch=monkeypatch)
    assert code == 0
    resuming = re.search(r"📌 Resuming from step (\d+)", out)
    assert resuming is not None, out
    resumed_from = int(resuming.group(1))
    assert resumed_from < max(_lrs(killed))  # the kill lost steps, and the resume trains them again
    for line in RESTORED:
        assert line in out
    expected = {step: lr for step, lr in _lrs(whole).items() if step > resumed_from}
    assert _lrs(out) == expected and len(expected) == STEPS - resumed_from
    # What the engine says of such a resume is what happened: the optimizer came back, the schedule goes on.
    claim = resume_restores("full")
    assert "the optimizer" in claim and "goes on along the schedule" in claim


def test_a_minimal_state_resume_restarts_the_chained_decay_from_the_configured_rate_as_the_trainer_does(
        project, capsys, monkeypatch):
    code, whole = train_in_process(_config(project, "m-whole", "minimal"), capsys, monkeypatch=monkeypatch)
    assert code == 0
    weights = project.root / "m-whole" / "checkpoints" / f"lora_weights_step_{INTERVAL:05d}.safetensors"
    code, out = train_in_process(_config(project, "m-resumed", "minimal", load_checkpoint=str(weights)), capsys,
                                 monkeypatch=monkeypatch)
    assert code == 0
    assert "Restored LR scheduler state" in out and "Restored RNG states" in out
    assert "Restored optimizer state" not in out  # a fresh optimizer, at the configured learning rate
    claim = resume_restores("minimal")  # the engine's words for this resume say so, and promise no schedule
    assert "holds no optimizer" in claim and "goes on along the schedule" not in claim

    def factor(step: int) -> float:  # LinearLR's defaults: 1.0 down to 0.1 over the run's steps
        return 1.0 - 0.9 * step / STEPS

    # The fresh optimizer's rate times the scheduler's chained ratios from the saved step onwards.
    expected = {step: f"{LR * factor(step) / factor(INTERVAL):.2e}" for step in range(INTERVAL + 1, STEPS + 1)}
    assert _lrs(out) == expected
    assert _lrs(whole)[STEPS] == "1.00e-05" and expected[STEPS] == "1.43e-05"


def test_a_state_the_new_optimizer_cannot_take_warns_and_trains_from_step_0(project, capsys, monkeypatch):
    narrow = project.config("n1.yaml", output_dir=str(project.root / "n1"), optimization={"steps": 2},
                            lora={"rank": 4, "alpha": 4, "target_modules": ["to_k", "to_q"]},
                            checkpoints={"interval": None, "keep_last_n": -1, "save_training_state": "full"})
    assert train_in_process(narrow, capsys, monkeypatch=monkeypatch)[0] == 0
    # Same fingerprint (optimizer, scheduler, mode, rank), more LoRA targets: the saved optimizer state
    # holds fewer parameters than the new optimizer, which refuses it.
    wider = project.config("n2.yaml", output_dir=str(project.root / "n2"), optimization={"steps": 3},
                           model={"load_checkpoint": str(project.root / "n1" / "checkpoints")})
    code, out = train_in_process(wider, capsys, monkeypatch=monkeypatch)
    assert code == 0
    assert "📌 Resuming from step 2" in out
    assert re.search(r"⚠️ Failed to restore training state: .+\. Starting from step 0\.", out)
    assert "🚀 Starting training..." in out and sorted(_lrs(out)) == [1, 2, 3]
