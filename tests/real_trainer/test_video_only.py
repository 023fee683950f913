"""Issue 33, done when: an all-silent dataset trains video only on the official trainer, every clip kept.

Three real mp4 clips without an audio stream, ``--approve`` and no audio option: the plan derives the
video-only config from the shipped t2v template (no audio modality, no audio generated at validation,
video attention LoRA targets), the trainer's own config class accepts it, the trainer trains on all three
samples (no ``Skipped N invalid samples``), and its step-0 validation sample has no sound track.
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


def test_an_all_silent_dataset_trains_video_only_on_the_real_trainer(trainer_env: TrainerEnvironment,
                                                                     trainer_root: Path, tiny_model: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    import av

    dataset = write_clips(tmp_path / "data", 3, audio=False)
    workspace = tmp_path / "ws"
    # A few steps, the step-0 validation only (it proves validation renders without audio), no eval renders.
    done = cli(*run_args(workspace, trainer_env, trainer_root, tiny_model, dataset, "--run", "r1", "--steps", "2",
                         "--validation-interval", "100", "--skip-eval", "--approve"))
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
