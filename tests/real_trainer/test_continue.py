"""Issue 33, case 3, on the official trainer: a finished run continued with ``--steps`` raised.

The real trainer restores a loaded checkpoint's scheduler (``_load_training_state``), whose ``total_iters``
is the old step count; the continuation instead loads the final LoRA weights with ``checkpoints.no_resume``,
so the trainer starts its counter and its scheduler at 0 over the extra steps. Checked in the real log and
outputs: the weights it loaded, no resume of the old state, only the extra steps (the trainer logs a Step
line with the learning rate every 20 steps only: the learning rate is the reference suite's to check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.real_trainer.conftest import cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def test_a_finished_run_continues_from_its_final_weights_on_the_real_trainer(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    dataset = write_clips(tmp_path / "data", 2)
    workspace = tmp_path / "ws"
    args = run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r1", "--approve",
                    "--skip-eval", "--checkpoint-interval", "2", "--validation-interval", "100")
    done = cli(*args, "--steps", "2")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    final = workspace / "r1" / "outputs" / "checkpoints" / "lora_weights_step_00002.safetensors"
    assert final.is_file()

    done = cli(*args, "--steps", "4")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "continuing from step 2 to 4" in done.stdout
    logs = workspace / "r1" / "logs"
    log = (logs / "train.continue-1.log").read_text(encoding="utf-8", errors="replace")
    assert f"Loading checkpoint from {final}" in log and "Resuming" not in log
    continued = workspace / "r1" / "outputs" / "continue-1" / "checkpoints"
    assert sorted(p.name for p in continued.glob("lora_weights_step_*.safetensors")) == [
        "lora_weights_step_00002.safetensors"]  # the trainer's own count: the 2 extra steps, from 0
    config = (workspace / "r1" / "config.continue-1.yaml").read_text(encoding="utf-8")
    assert f"load_checkpoint: {final}" in config and "no_resume: true" in config
    summary = (workspace / "r1" / "outputs" / "run-summary.md").read_text(encoding="utf-8")
    assert f"ltx-pipeline run --workspace {workspace} --run r1 --steps 8" in summary
