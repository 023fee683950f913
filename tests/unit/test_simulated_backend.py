"""The simulated backend's trainer: the real trainer's shape, driven by a cost surface."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.backends.simulated import SimulatedBackend
from ltx_pipeline.trainer_log import TrainingProgress, classify_failure, parse_lines

SURFACE = {
    "gpu": {"name": "NVIDIA GeForce RTX 5090", "memory_mib": 32607, "count": 1},
    "load_time_s": 120, "validation_time_s": 40,
    "points": [
        {"knobs": {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 1,
                   "enable_gradient_checkpointing": True}, "step_time_s": 6.0, "peak_vram_gb": 26.0,
         "validation_peak_vram_gb": 29.5},
        {"knobs": {"quantization": None, "optimizer_type": "adamw8bit", "batch_size": 1,
                   "enable_gradient_checkpointing": True}, "step_time_s": 5.0, "peak_vram_gb": 30.0,
         "validation_peak_vram_gb": 33.0},
        {"knobs": {"quantization": "int8-quanto", "optimizer_type": "adamw", "batch_size": 1,
                   "enable_gradient_checkpointing": True}, "step_time_s": 5.8, "peak_vram_gb": 28.0,
         "loss_nan": True},
        {"knobs": {"quantization": "int8-quanto", "optimizer_type": "adamw8bit", "batch_size": 2,
                   "enable_gradient_checkpointing": True}, "step_time_s": 9.0, "peak_vram_gb": 30.5,
         "crash": "CUDA error: an illegal memory access was encountered"},
    ],
}


@pytest.fixture
def backend(tmp_path: Path) -> SimulatedBackend:
    path = tmp_path / "surface.yaml"
    path.write_text(yaml.safe_dump(SURFACE))
    return SimulatedBackend(path)


def write_config(tmp_path: Path, name: str = "config.yaml", **knobs) -> Path:
    config = {
        "model": {"model_path": "placeholder.safetensors", "training_mode": "lora"},
        "lora": {"rank": 16, "alpha": 16},
        "training_strategy": {"name": "flexible", "video": {"is_generated": True, "latents_dir": "latents"}},
        "optimization": {"steps": knobs.pop("steps", 60), "batch_size": knobs.pop("batch_size", 1),
                         "optimizer_type": knobs.pop("optimizer_type", "adamw8bit"),
                         "enable_gradient_checkpointing": True},
        "acceleration": {"quantization": knobs.pop("quantization", "int8-quanto")},
        "data": {"preprocessed_data_root": "placeholder"},
        "validation": {"interval": knobs.pop("interval", 40), "prompts": ["a fox"]},
        "checkpoints": {"interval": knobs.pop("checkpoint_interval", 20), "keep_last_n": -1},
        "output_dir": str(tmp_path / "out"),
    }
    config["model"].update(knobs)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path


def train(backend: SimulatedBackend, config: Path) -> subprocess.CompletedProcess:
    spec = backend.train_command(config)
    return subprocess.run(list(spec.argv), cwd=spec.cwd, env={**os.environ, **spec.env}, capture_output=True,
                          text=True, timeout=60)


def test_a_fitting_config_trains_with_the_surfaces_figures(backend, tmp_path) -> None:
    done = train(backend, write_config(tmp_path, steps=100, checkpoint_interval=50))
    assert done.returncode == 0, done.stderr
    progress = TrainingProgress(validation_interval=40, checkpoint_interval=50)
    progress.feed(parse_lines(done.stdout.splitlines()))
    assert progress.percent == 100.0
    assert progress.stats is not None and progress.stats.peak_gpu_memory_gb == 29.5
    assert progress.steady_step_time() == pytest.approx(6.0)  # validation and checkpoint steps excluded
    cost = json.loads((tmp_path / "out" / "simulated_cost.json").read_text())
    assert cost["gpu_seconds"] == pytest.approx(120 + 40 * 3 + 100 * 6.0)  # load, validations at 0/40/80, steps
    weights = sorted(p.name for p in (tmp_path / "out" / "checkpoints").glob("lora_weights_step_*.safetensors"))
    assert weights == ["lora_weights_step_00050.safetensors", "lora_weights_step_00100.safetensors"]


@pytest.mark.parametrize(("knobs", "kind"), [
    ({"quantization": None, "optimizer_type": "adamw"}, "oom_training"),  # not on the surface
    ({"quantization": None}, "oom_validation"),  # fits training, validation needs 33 GB
    ({"optimizer_type": "adamw"}, "nan_loss"),
    ({"batch_size": 2}, "crash"),
])
def test_failures_look_like_the_trainers(backend, tmp_path, knobs, kind) -> None:
    done = train(backend, write_config(tmp_path, **knobs))
    if kind == "nan_loss":
        assert done.returncode == 0 and "Loss: nan" in done.stdout
    else:
        assert done.returncode == 1
    failure = classify_failure(done.returncode, None, done.stdout.splitlines(), done.stderr.splitlines())
    assert failure.kind == kind


def test_resume_from_a_checkpoint_continues_at_its_step(backend, tmp_path) -> None:
    assert train(backend, write_config(tmp_path, steps=40)).returncode == 0
    weights = tmp_path / "out" / "checkpoints" / "lora_weights_step_00040.safetensors"
    done = train(backend, write_config(tmp_path, "resume.yaml", steps=80, load_checkpoint=str(weights)))
    assert done.returncode == 0 and "📌 Resuming from step 40" in done.stdout
    assert "Step 60/80" in done.stdout and "Step 20/80" not in done.stdout
    mismatch = write_config(tmp_path, "mismatch.yaml", steps=80, load_checkpoint=str(weights.parent))
    data = yaml.safe_load(mismatch.read_text())
    data["optimization"]["scheduler_type"] = "cosine"
    mismatch.write_text(yaml.safe_dump(data))
    done = train(backend, mismatch)
    assert "Training state config mismatch (scheduler_type: linear → cosine)" in done.stdout
    assert "Step 20/80" in done.stdout
