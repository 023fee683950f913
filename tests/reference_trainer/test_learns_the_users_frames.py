"""What the toy learns comes from the user's frames: a LoRA trained on red clips drifts its samples to red."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ltx_pipeline.ltx.media import read_frames
from ltx_pipeline.ltx.sample_clips import write_clip
from tests.reference_trainer.conftest import Project, run_trainer

RED = np.array([255.0, 0.0, 0.0])
STEPS = 40


@pytest.mark.timeout(300)
def test_samples_of_a_lora_trained_on_red_clips_are_closer_to_red_than_the_base_models(tmp_path: Path) -> None:
    from ltx_pipeline.reference_trainer import make_base, preprocess

    base = tmp_path / "base.safetensors"
    make_base.main([str(base)])
    rows = []
    for i in range(4):  # single-colour clips: a red square on a red background
        write_clip(tmp_path / "videos" / f"red{i}.mp4", 17, 64, 64, colour="red", background="red")
        rows.append({"caption": "a red picture", "video": f"videos/red{i}.mp4"})
    (tmp_path / "dataset.json").write_text(json.dumps(rows))
    assert preprocess.main([str(tmp_path / "dataset.json"), "--resolution-buckets", "64x64x17", "--model-path",
                            str(base), "--text-encoder-path", str(tmp_path)]) == 0
    config = Project(tmp_path, base, tmp_path / ".precomputed").config(
        optimization={"learning_rate": 5e-3, "steps": STEPS, "batch_size": 1, "optimizer_type": "adamw",
                      "scheduler_type": "linear", "enable_gradient_checkpointing": False},
        lora={"rank": 8, "alpha": 8,
              "target_modules": ["to_k", "to_q", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2"]},
        # interval = STEPS: the step-0 samples are the base model's (a fresh LoRA adds nothing), the last the LoRA's
        validation={"samples": [{"prompt": "a red picture"}], "video_dims": [64, 64, 17], "inference_steps": 8,
                    "interval": STEPS})
    done = run_trainer(config, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def distance_to_red(step: int) -> float:
        frames = read_frames(tmp_path / "out" / "samples" / f"step_{step:06d}_1.mp4")
        assert frames.shape == (17, 64, 64, 3)
        return float(np.abs(frames.reshape(-1, 3).astype(float) - RED).mean())

    base_distance, lora_distance = distance_to_red(0), distance_to_red(STEPS)
    assert lora_distance < 0.9 * base_distance, (base_distance, lora_distance)
