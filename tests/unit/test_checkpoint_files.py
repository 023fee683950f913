"""The trainer's checkpoint file names, built and found in one place (``checkpoints.files``, ``.discovery``)."""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.checkpoints.discovery import weights_files
from ltx_pipeline.checkpoints.files import (
    WEIGHTS_RE,
    final_weights_name,
    state_file_name,
    weights_file_name,
)


def test_names_follow_the_trainer() -> None:
    assert weights_file_name("lora", 500) == "lora_weights_step_00500.safetensors"
    assert weights_file_name("full", 7) == "model_weights_step_00007.safetensors"
    assert state_file_name(500) == "training_state_step_00500.pt"
    assert WEIGHTS_RE.match(weights_file_name("full", 123456))


def test_final_weights_come_from_the_config_a_missing_mode_being_lora() -> None:
    assert final_weights_name({"optimization": {"steps": 60}}) == "lora_weights_step_00060.safetensors"
    assert final_weights_name({"model": {"training_mode": "full"}, "optimization": {"steps": 60}}) == \
        "model_weights_step_00060.safetensors"


def test_weights_files_lists_each_weights_file_with_its_step(tmp_path: Path) -> None:
    assert weights_files(tmp_path / "absent") == []
    for name in ("lora_weights_step_00020.safetensors", "model_weights_step_00040.safetensors",
                 "training_state_step_00020.pt", "lora_weights_step_final.safetensors"):
        (tmp_path / name).write_bytes(b"")
    assert sorted(weights_files(tmp_path)) == [(20, str(tmp_path / "lora_weights_step_00020.safetensors")),
                                               (40, str(tmp_path / "model_weights_step_00040.safetensors"))]
