"""Checkpoint files, retention and resume, with ltx-trainer's names and rules (facts §4.6–§4.8).

Owns: ``checkpoints/{lora|model}_weights_step_{05d}.safetensors`` (LoRA: the adapter weights with
PEFT's key names, ``base_model.model.`` stripped, ``diffusion_model.`` prepended; full: the plain state dict; cast
to ``checkpoints.precision``), ``training_state_step_{05d}.pt`` (written as ``.pt.tmp`` then
renamed; full / minimal / off), retention of the last ``keep_last_n`` distinct steps written by
this process (the trainer's duplicate-final-save bug that deletes its own final weights is NOT
reproduced: the final checkpoint is always kept), resolving ``model.load_checkpoint`` (a
file, or a folder searched recursively for the highest step) with the state file beside it, and
restoring that state as ``_restore_training_state`` does: the optimizer (in "full" mode only), then the
scheduler, then the RNG states (one process only); a failure warns and trains from step 0.

What "minimal" keeps is the trainer's, not an ideal resume: the scheduler's position comes back but
the optimizer is fresh, so its learning rate is the configured one again and the chained schedulers
(linear, cosine, polynomial, step) scale that rate onwards, not the one the interrupted run had
reached. Only "full" (the optimizer's param groups carry their ``lr``) logs the uninterrupted run's
learning rate at every step.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ltx_pipeline.reference_trainer.lora import load_lora_state_dict, lora_state_dict
from ltx_pipeline.workspace import atomic_write

__all__ = ["Retention", "fingerprint", "load_state", "load_weights", "resolve_checkpoint", "restore_state",
           "rng_states", "save_state", "save_weights"]

logger = logging.getLogger("ltxv_trainer")
_COMFY_PREFIX = "diffusion_model."
_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def fingerprint(config) -> dict:  # noqa: ANN001 - LtxTrainerConfig
    """The fields a resume must agree on: optimizer, scheduler, training mode, LoRA rank."""
    found = {
        "optimizer_type": config.optimization.optimizer_type,
        "scheduler_type": config.optimization.scheduler_type,
        "training_mode": config.model.training_mode,
    }
    if config.model.training_mode == "lora" and config.lora is not None:
        found["lora_rank"] = config.lora.rank
    return found


def save_weights(model: torch.nn.Module, training_mode: str, step: int, folder: Path, precision: str) -> Path:
    """Write the step's weights file and return its path."""
    dtype = _DTYPES[precision]
    if training_mode == "lora":
        tensors = {_COMFY_PREFIX + key: value for key, value in lora_state_dict(model).items()}
        path = folder / f"lora_weights_step_{step:05d}.safetensors"
    else:
        tensors = dict(model.state_dict())
        path = folder / f"model_weights_step_{step:05d}.safetensors"
    tensors = {key: value.detach().to("cpu", dtype).contiguous() for key, value in tensors.items()}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{path.name}.partial"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    atomic_write(path, tmp.read_bytes())
    tmp.unlink()
    return path


def save_state(folder: Path, step: int, state: dict) -> Path:
    """``training_state_step_{05d}.pt``, written to ``.pt.tmp`` first and renamed into place."""
    path = folder / f"training_state_step_{step:05d}.pt"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        torch.save({k: v for k, v in state.items() if v is not None}, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


class Retention:
    """Keeps the files of the last ``keep_last_n`` distinct steps this process saved (<= 0: all)."""

    def __init__(self, keep_last_n: int) -> None:
        self.keep = keep_last_n
        self._steps: list[tuple[int, list[Path]]] = []

    def saved(self, step: int, files: list[Path]) -> None:
        """Record a save and delete what falls out of the window."""
        self._steps = [(s, f) for s, f in self._steps if s != step] + [(step, files)]
        if self.keep <= 0:
            return
        while len(self._steps) > self.keep:
            _, old = self._steps.pop(0)
            for file in old:
                if file.exists():
                    file.unlink()
                    logger.info(f"Removed old checkpoint: {file}")


def _step_of(path: Path) -> int:
    return int(path.stem.split("step_")[1])


def resolve_checkpoint(load_checkpoint: str | Path | None) -> Path | None:
    """The weights file ``model.load_checkpoint`` names, or None (with the trainer's warning).

    Raises:
        ValueError: the path does not exist, or is a file without the .safetensors extension.
    """
    if load_checkpoint is None:
        return None
    path = Path(load_checkpoint).expanduser()
    if path.is_file():
        if path.suffix != ".safetensors":
            raise ValueError(f"Checkpoint file must have a .safetensors extension: {path}")
        return path
    if path.is_dir():
        found = [p for p in path.rglob("*step_*.safetensors") if p.stem.split("step_")[1].isdigit()]
        if not found:
            logger.warning(f"⚠️ Could not find checkpoint at {path}")
            return None
        return max(found, key=_step_of)
    raise ValueError(f"Invalid checkpoint path: {path}. Must be a file or directory.")


def load_weights(model: torch.nn.Module, path: Path, training_mode: str) -> None:
    """Load LoRA adapter weights (trainer format) or the full state dict into ``model``."""
    logger.info(f"📥 Loading checkpoint from {path}")
    tensors = load_file(str(path))
    if training_mode == "lora":
        unexpected = load_lora_state_dict(model, {key.removeprefix(_COMFY_PREFIX): value
                                                  for key, value in tensors.items()})
        if unexpected:
            raise ValueError(f"Checkpoint {path} does not match the model: unexpected keys {unexpected[:3]}")
        logger.info("✅ LoRA checkpoint loaded successfully")
    else:
        model.load_state_dict(tensors, strict=True)
        logger.info("✅ Full model checkpoint loaded successfully")


def load_state(weights: Path, current: dict, no_resume: bool) -> dict | None:
    """The training state saved beside ``weights`` if a resume should use it, else None."""
    if no_resume:
        return None
    match = re.search(r"step_(\d+)", weights.name)
    if match is None:
        return None
    state_path = weights.parent / f"training_state_step_{match.group(1)}.pt"
    if not state_path.is_file():
        return None
    try:
        state = torch.load(state_path, map_location="cpu", weights_only=False)
    except Exception as error:  # noqa: BLE001 - the trainer warns and starts fresh on any load error
        logger.warning(f"⚠️ Failed to load training state from {state_path}: {error}. Starting from step 0.")
        return None
    logger.info(f"📥 Loaded training state from {state_path}")
    saved = state.get("config_fingerprint", {})
    changes = [f"{key}: {saved.get(key)} → {value}" for key, value in current.items() if saved.get(key) != value]
    if changes:
        logger.warning(f"⚠️ Training state config mismatch ({', '.join(changes)}). Starting from step 0. "
                       "Set checkpoints.no_resume=true to silence this warning.")
        return None
    if state.get("global_step", -1) < 0:
        return None
    logger.info(f"📌 Resuming from step {state['global_step']}")
    return state


def rng_states() -> dict:
    """The RNG states a training state keeps: torch's, and CUDA's where there is a CUDA device."""
    states = {"torch_state": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda_state"] = torch.cuda.get_rng_state()
    return states


def restore_state(state: dict, optimizer: torch.optim.Optimizer,
                  scheduler: torch.optim.lr_scheduler.LRScheduler | None, num_processes: int) -> bool:
    """Load a resumed state into a new optimizer and scheduler, then the RNG; False when it does not fit.

    False (after the trainer's warning) means training starts from step 0, the weights still loaded and
    whatever was loaded before the failure kept, as the trainer does.
    """
    try:
        if state.get("optimizer_state_dict") is not None:
            optimizer.load_state_dict(state["optimizer_state_dict"])
            logger.debug("Restored optimizer state (full mode)")
        if state.get("lr_scheduler_state_dict") is not None and scheduler is not None:
            scheduler.load_state_dict(state["lr_scheduler_state_dict"])
            logger.debug("Restored LR scheduler state")
    except Exception as error:  # noqa: BLE001 - the trainer warns and starts from step 0 on any restore error
        logger.warning(f"⚠️ Failed to restore training state: {error}. Starting from step 0.")
        return False
    if num_processes > 1:
        # Only the main process's RNG was saved: other ranks would take it too, so none restores it.
        logger.debug("Skipping RNG restore in multi-process mode (only main process state was saved)")
        return True
    rng = state.get("rng_states", {})
    if rng.get("torch_state") is not None:
        torch.set_rng_state(rng["torch_state"])
    if rng.get("cuda_state") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda_state"])
    logger.debug("Restored RNG states")
    return True
