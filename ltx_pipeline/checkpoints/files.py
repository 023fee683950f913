"""The names the LTX-2 trainer gives its checkpoint files, in one place.

The trainer saves ``{lora|model}_weights_step_NNNNN.safetensors`` (LoRA or full weights) beside
``training_state_step_NNNNN.pt`` in ``<output_dir>/checkpoints``, and always a last one at the
stage's final step, counted from the stage's own start. Everything that builds, finds or parses
such a name (config_patch, train, evaluate, the node runner, the simulated trainer, ``status``
through the CLI) asks here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["STATE_RE", "WEIGHTS_GLOB", "WEIGHTS_RE", "final_weights_name", "resume_restores", "state_file_name",
           "weights_file_name", "weights_files", "weights_prefix"]

WEIGHTS_GLOB = "*_weights_step_*.safetensors"
WEIGHTS_RE = re.compile(r"^(lora|model)_weights_step_(\d+)\.safetensors$")
STATE_RE = re.compile(r"^training_state_step_(\d+)\.pt$")


def resume_restores(save_training_state: str | None) -> str:
    """What the trainer restores from a ``training_state_step_N.pt`` saved with ``checkpoints.save_training_state``.

    The trainer (``_restore_training_state``) loads the optimizer only from a "full" state; from a "minimal"
    one (its default) a fresh optimizer starts at the configured learning rate, and the restored scheduler's
    chained decay continues from that rate, so the learning rate leaves the uninterrupted curve.
    """
    if save_training_state == "full":
        return ("the trainer restores the step, the optimizer, the learning-rate scheduler and the random state, "
                "so the learning rate goes on along the schedule.")
    return ("the trainer restores the step, the learning-rate scheduler and the random state, but its minimal state "
            "(`checkpoints.save_training_state: minimal`) holds no optimizer: a fresh one starts at the configured "
            "learning rate and the schedule decays from there, not from where it was.")


def weights_prefix(training_mode: str) -> str:
    """``lora`` for a LoRA training, ``model`` for a full one (the trainer's file name prefix)."""
    return "lora" if training_mode == "lora" else "model"


def weights_file_name(training_mode: str, step: int) -> str:
    """The weights file the trainer writes at ``step``, e.g. ``lora_weights_step_00500.safetensors``."""
    return f"{weights_prefix(training_mode)}_weights_step_{step:05d}.safetensors"


def final_weights_name(config: Mapping[str, Any]) -> str:
    """The weights a trainer config's run ends with: its last checkpoint, at ``optimization.steps``.

    Args:
        config: the trainer config's values (as loaded from its YAML); a missing training mode is LoRA.
    """
    steps = int((config.get("optimization") or {}).get("steps", 0))
    return weights_file_name((config.get("model") or {}).get("training_mode", "lora"), steps)


def state_file_name(step: int) -> str:
    """The training-state file the trainer writes beside the weights of ``step``."""
    return f"training_state_step_{step:05d}.pt"


def weights_files(checkpoints: Path) -> list[tuple[int, str]]:
    """Each weights file in a ``checkpoints`` folder with its step; [] when the folder is absent."""
    if not checkpoints.is_dir():
        return []
    found = []
    for path in checkpoints.glob(WEIGHTS_GLOB):
        digits = path.stem.rsplit("step_", 1)[-1]
        if digits.isdigit():
            found.append((int(digits), str(path)))
    return found
