"""The settings a training stage keeps once it has checkpoints (#49).

A stage resumed from a checkpoint must go on with the settings it started with: the trainer restores its step,
scheduler and optimizer, but takes everything else from the config it is launched with, so a learning rate,
batch or quantization changed upstream (an edited run.yaml, another autotune winner) would silently train the
rest of the stage otherwise. ``changed_settings`` compares the config about to be launched with the one the
trainer saved when the stage started (its ``training_config.yaml``). Pure: the caller reads both files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ltx_pipeline.ltx.config_values import config_value

__all__ = ["KEPT_SETTINGS", "changed_settings"]

#: What shapes the training itself. Not here: the steps (a resume keeps the launched count itself), where its
#: files are, validation, logging and checkpointing, and ``model.load_checkpoint`` (how a resume is pointed).
KEPT_SETTINGS = (
    "model.training_mode", "lora.rank", "lora.alpha", "lora.dropout", "lora.target_modules",
    "optimization.learning_rate", "optimization.batch_size", "optimization.gradient_accumulation_steps",
    "optimization.optimizer_type", "optimization.scheduler_type", "optimization.scheduler_params",
    "optimization.max_grad_norm", "optimization.enable_gradient_checkpointing",
    "acceleration.mixed_precision_mode", "acceleration.quantization", "training_strategy",
)
_ABSENT = object()


def changed_settings(started: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``path: old -> new`` for each kept setting both configs hold and that differs (floats compared as floats)."""
    changed = []
    for path in KEPT_SETTINGS:
        old, new = config_value(started, path, _ABSENT), config_value(now, path, _ABSENT)
        if old is _ABSENT or new is _ABSENT or _same(old, new):
            continue
        changed.append(f"{path}: {old!r} -> {new!r}")
    return changed


def _same(old: Any, new: Any) -> bool:
    """Equal as the trainer reads them: numbers as numbers; mappings by the keys both hold (the trainer saves its
    whole model, defaults included, where a config may leave a default out)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return all(_same(old[key], new[key]) for key in set(old) & set(new))
    if isinstance(old, list | tuple) and isinstance(new, list | tuple):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new, strict=True))
    if isinstance(old, int | float) and isinstance(new, int | float) and not isinstance(old, bool):
        return float(old) == float(new)
    return bool(old == new)
