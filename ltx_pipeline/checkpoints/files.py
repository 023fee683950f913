"""The names the LTX-2 trainer gives its checkpoint files, in one place.

The trainer saves ``{lora|model}_weights_step_NNNNN.safetensors`` (LoRA or full weights) beside
``training_state_step_NNNNN.pt`` in ``<output_dir>/checkpoints``, and always a last one at the
stage's final step, counted from the stage's own start. Everything that builds or parses such a
name (config_patch, train, resume, evaluate, the launch checks, the node runner, the simulated
trainer, ``status`` through the CLI) asks here; finding them in a folder is ``checkpoints.discovery``.
``tests/unit/test_architecture_rooms.py`` fails on a checkpoint name built anywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["LOAD_GLOB", "STATE_RE", "WEIGHTS_GLOB", "WEIGHTS_RE", "final_weights_name", "resume_restores",
           "state_beside", "state_file_name", "step_in_name", "weights_file_name", "weights_prefix"]

WEIGHTS_GLOB = "*_weights_step_*.safetensors"
WEIGHTS_RE = re.compile(r"^(lora|model)_weights_step_(\d+)\.safetensors$")
STATE_RE = re.compile(r"^training_state_step_(\d+)\.pt$")
# What the trainer looks for (recursively) in a ``model.load_checkpoint`` folder (``_find_checkpoint``).
LOAD_GLOB = "*step_*.safetensors"
_STEP = re.compile(r"step_(\d+)")  # how the trainer reads a step from a file name (``_load_training_state``)


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


def step_in_name(name: str) -> str | None:
    """The step digits of a checkpoint file name as written (``00500``), read as the trainer reads them."""
    match = _STEP.search(name)
    return match.group(1) if match else None


def state_beside(weights: Path) -> Path | None:
    """The training-state file the trainer loads with ``weights`` (the same digits, zero padding kept);
    None when the name holds no step."""
    digits = step_in_name(weights.name)
    return weights.parent / f"training_state_step_{digits}.pt" if digits is not None else None
