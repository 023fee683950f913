"""A stage with checkpoints goes on with the settings it started with (#49).

On main a re-run upstream (an edited run.yaml, another autotune winner) rewrote a stage's config and `resume`
continued its checkpoints with the new learning rate, batch or quantization, saying nothing. The trainer's own
record of what it ran with (``training_config.yaml``) is the reference; a changed setting is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ltx_pipeline.checkpoints.discovery import CheckpointPair
from ltx_pipeline.errors import ResumeRefused
from ltx_pipeline.ltx.stage_settings import KEPT_SETTINGS, changed_settings
from ltx_pipeline.training.resume import check_same_settings

# As the trainer saves it: its whole model, defaults included, numbers as it parsed them.
STARTED: dict[str, Any] = {
    "model": {"training_mode": "lora", "load_checkpoint": None, "model_path": "/m/ltx.safetensors"},
    "lora": {"rank": 32, "alpha": 32, "dropout": 0.0, "target_modules": ["to_k", "to_q", "to_v", "to_out.0"]},
    "optimization": {"learning_rate": 0.0001, "steps": 2000, "batch_size": 1, "gradient_accumulation_steps": 1,
                     "optimizer_type": "adamw", "scheduler_type": "linear", "scheduler_params": {},
                     "max_grad_norm": 1.0, "enable_gradient_checkpointing": True},
    "acceleration": {"mixed_precision_mode": "bf16", "quantization": None, "load_text_encoder_in_8bit": False},
    "training_strategy": {"name": "text_to_video", "first_frame_conditioning_p": 0.1, "with_audio": False},
    "validation": {"interval": 250, "inference_steps": 30},
}


def _config(**changes: Any) -> dict[str, Any]:
    """The run's config.yaml: fewer keys than the trainer's dump, numbers as YAML wrote them."""
    config = yaml.safe_load(yaml.safe_dump(STARTED))
    config["optimization"]["learning_rate"] = 1e-4
    del config["acceleration"]["load_text_encoder_in_8bit"], config["training_strategy"]["with_audio"]
    for path, value in changes.items():
        node = config
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return config


def test_the_same_settings_as_written_otherwise_are_no_change() -> None:
    assert changed_settings(STARTED, _config()) == []
    # How a resume is pointed, the steps, validation and paths are not settings a stage keeps.
    assert changed_settings(STARTED, _config(**{"model.load_checkpoint": "/w/ckpt.safetensors",
                                                "optimization.steps": 3000, "validation.interval": 100,
                                                "model.model_path": "/other/ltx.safetensors"})) == []


@pytest.mark.parametrize(("path", "value"), [
    ("optimization.learning_rate", 2e-4), ("optimization.batch_size", 2), ("acceleration.quantization", "int8-quanto"),
    ("lora.rank", 64), ("optimization.optimizer_type", "adamw8bit"),
    ("training_strategy.first_frame_conditioning_p", 0.5), ("optimization.enable_gradient_checkpointing", False)])
def test_each_kept_setting_that_changed_is_named(path: str, value: Any) -> None:
    assert any(path.startswith(kept) for kept in KEPT_SETTINGS)
    [change] = changed_settings(STARTED, _config(**{path: value}))
    assert change.startswith(path.split(".")[0]) and repr(value) in change


def test_a_resume_with_changed_settings_is_refused_with_the_ways_out(tmp_path: Path) -> None:
    output = tmp_path / "outputs"
    output.mkdir()
    (output / "training_config.yaml").write_text(yaml.safe_dump(STARTED))
    pair = CheckpointPair(150, output / "checkpoints" / "lora_weights_step_00150.safetensors", None)
    check_same_settings(pair, _config(), output)  # unchanged: resumes
    with pytest.raises(ResumeRefused) as refused:
        check_same_settings(pair, _config(**{"optimization.learning_rate": 2e-4}), output)
    line = refused.value.line()
    assert "Cannot resume from step 150" in line and "optimization.learning_rate: 0.0001 -> 0.0002" in line
    assert "--restart-training" in line and "run --run NEW" in line
    check_same_settings(pair, _config(**{"optimization.batch_size": 4}), tmp_path)  # no record there: no check


def test_the_trainers_own_dump_with_python_tags_is_read(tmp_path: Path) -> None:
    """The trainer writes ``yaml.dump(config.model_dump())``: paths and enums come out as python tags."""
    import enum

    class Optimizer(str, enum.Enum):
        ADAMW = "adamw"

    dump = yaml.safe_load(yaml.safe_dump(STARTED))
    dump["optimization"]["optimizer_type"] = Optimizer.ADAMW
    dump["model"]["model_path"] = Path("/m/ltx.safetensors")
    (tmp_path / "training_config.yaml").write_text(yaml.dump(dump))
    assert "!!python/" in (tmp_path / "training_config.yaml").read_text()
    pair = CheckpointPair(150, tmp_path / "lora_weights_step_00150.safetensors", None)
    check_same_settings(pair, _config(), tmp_path)
    with pytest.raises(ResumeRefused, match="optimization.optimizer_type: 'adamw' -> 'adamw8bit'"):
        check_same_settings(pair, _config(**{"optimization.optimizer_type": "adamw8bit"}), tmp_path)
