"""Issue 33 on the official trainer: an all-silent dataset trains video only, every clip kept, and the finished
run continues from its final weights when ``--steps`` is raised (one run for both: the suite's time budget).

Three real mp4 clips without an audio stream, ``--approve`` and no audio option: the plan derives the
video-only config from the shipped t2v template (no audio modality, no audio generated at validation,
video attention LoRA targets), the trainer's own config class accepts it, the trainer trains on all three
samples (no ``Skipped N invalid samples``), and its step-0 validation sample has no sound track.

Then ``--steps 4``: the real trainer restores a loaded checkpoint's scheduler (``_load_training_state``), whose
``total_iters`` is the old step count; the continuation instead loads the final LoRA weights with
``checkpoints.no_resume``, so the trainer starts its counter and its scheduler at 0 over the extra steps. Checked
in the real log and outputs: the weights it loaded, no resume of the old state, only the extra steps, still video
only (the trainer logs a Step line with the learning rate every 20 steps only: the learning rate is the reference
suite's to check).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.real_trainer.conftest import cli, run_args, write_clips
from tests.real_trainer.environment import TrainerEnvironment

pytestmark = pytest.mark.real_trainer


def test_an_all_silent_dataset_trains_video_only_then_continues_from_its_final_weights(
        trainer_env: TrainerEnvironment, trainer_root: Path, tiny_model: dict[str, Any], tmp_path: Path) -> None:
    import av

    dataset = write_clips(tmp_path / "data", 3, audio=False)
    workspace = tmp_path / "ws"
    # A few steps, the step-0 validation only (it proves validation renders without audio), no eval renders.
    args = run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r1", "--approve",
                    "--skip-eval", "--checkpoint-interval", "2", "--validation-interval", "100")
    done = cli(*args, "--steps", "2")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run = workspace / "r1"
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["training_strategy"]["audio"] is None and config["validation"]["generate_audio"] is False
    assert all(t.startswith(("attn1.", "attn2.")) for t in config["lora"]["target_modules"])
    assert "video only" in (run / "plan.md").read_text()

    status = cli("status", "--workspace", str(workspace), "--run", "r1", "--json")
    report = json.loads(status.stdout)["runs"][0]
    validate = next(p for p in report["phases"] if p["phase"] == "validate")
    assert "mirror" not in validate["summary"]  # the trainer's own pydantic config class accepted it
    monitor = next(p for p in report["phases"] if p["phase"] == "monitor")
    assert "trained on 3 sample(s)" in monitor["summary"]

    log = (run / "logs" / "train.log").read_text(encoding="utf-8", errors="replace")
    assert "invalid samples" not in log  # no sample dropped for missing audio latents
    assert "(3 sample(s) trained on;" in (run / "outputs" / "run-summary.md").read_text()
    samples = sorted((run / "outputs" / "samples").glob("*.mp4"))
    assert samples
    for sample in samples:
        with av.open(str(sample)) as container:
            assert container.streams.video and not container.streams.audio, sample
    final = run / "outputs" / "checkpoints" / "lora_weights_step_00002.safetensors"
    assert final.is_file()

    done = cli(*args, "--steps", "4")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "continuing from step 2 to 4" in done.stdout
    log = (run / "logs" / "train.continue-1.log").read_text(encoding="utf-8", errors="replace")
    assert f"Loading checkpoint from {final}" in log and "Resuming" not in log
    continued = run / "outputs" / "continue-1" / "checkpoints"
    assert sorted(p.name for p in continued.glob("lora_weights_step_*.safetensors")) == [
        "lora_weights_step_00002.safetensors"]  # the trainer's own count: the 2 extra steps, from 0
    text = (run / "config.continue-1.yaml").read_text(encoding="utf-8")
    assert f"load_checkpoint: {final}" in text and "no_resume: true" in text
    assert yaml.safe_load(text)["training_strategy"]["audio"] is None  # the continuation is video only too
    summary = (run / "outputs" / "run-summary.md").read_text(encoding="utf-8")
    assert f"ltx-pipeline run --workspace {workspace} --run r1 --steps 8" in summary
