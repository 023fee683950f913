"""Resume a stage from its checkpoints: check the newest complete pair, patch the config to it.

Owns the trainer's resume rules as the engine applies them (facts §4.8). The checkpoint itself, a
*complete pair* of weights and training state, is found by ``checkpoints.discovery``; what a retry
would change (a failed launch's proposed fix) is ``training.fixes``. Resuming means
pointing ``model.load_checkpoint`` at the pair's weights through the config-patch mechanism; the
trainer then restores the step, the scheduler and, from a "full" state (config_patch asks for one in LoRA
runs), the optimizer, so the learning rate goes on along the schedule the interrupted attempt started with
(its ``total_iters``, even if the steps changed since; ``checkpoints.files.resume_restores``). Training a
*finished* stage further is no resume: it is a continuation stage with a fresh schedule (``ltx.recipe``).
The invariant kept here: a resume whose state fingerprint (optimizer_type, scheduler_type,
training_mode, lora rank) no longer matches the config is refused, because the trainer would silently
restart at step 0 and overwrite earlier files.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ltx_pipeline.checkpoints.discovery import CheckpointPair, latest_pair
from ltx_pipeline.errors import ResumeRefused
from ltx_pipeline.ltx.stage_settings import changed_settings
from ltx_pipeline.ltx.trainer_config.view import TrainerConfigView, load_config_view, read_config_view
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

if TYPE_CHECKING:
    from ltx_pipeline.ltx.config_patch import PatchRecord

__all__ = ["FINGERPRINT_KEYS", "PlannedStart", "check_compatible", "check_same_settings", "config_fingerprint",
           "patch_resume", "read_state", "refuse_incompatible_checkpoints", "restore_planned_start", "set_aside"]

FINGERPRINT_KEYS = ("optimizer_type", "scheduler_type", "training_mode", "lora_rank")


def read_state(state_path: Path) -> dict[str, Any]:
    """The training-state dict: JSON (the simulated trainer) or a ``torch.save`` pickle (the trainers).

    Raises:
        ResumeRefused: the file cannot be read as either.
    """
    raw = state_path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if isinstance(data, dict):
        return data
    try:
        import torch  # only here: a real training state is a pickle

        # weights_only=False is how the trainer itself loads it (the state holds RNG byte tensors).
        state = torch.load(state_path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unreadable state means the same to the user
        raise ResumeRefused(f"Cannot read the training state {state_path.name}: {type(exc).__name__}",
                            where=str(state_path),
                            fix="delete that pair (weights and state) so the previous complete one is used") from None
    return dict(state)


def config_fingerprint(config: TrainerConfigView | Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint the trainer compares on resume (its state's ``config_fingerprint``), from a config."""
    view = read_config_view(config)
    found: dict[str, Any] = {"optimizer_type": view.optimization.optimizer_type,
                             "scheduler_type": view.optimization.scheduler_type,
                             "training_mode": view.model.training_mode}
    if found["training_mode"] == "lora":
        found["lora_rank"] = view.lora.rank if view.lora is not None else None
    return found


def check_compatible(pair: CheckpointPair, config: TrainerConfigView | Mapping[str, Any]) -> int:
    """The step the trainer will resume at; refuses when the state's fingerprint differs from ``config``.

    Raises:
        ResumeRefused: a fingerprint field changed since the checkpoint (the trainer would restart at 0).
    """
    assert pair.state is not None
    state = read_state(pair.state)
    saved = state.get("config_fingerprint") or {}
    now = config_fingerprint(config)
    changed = [f"{key}: {saved.get(key)} -> {now.get(key)}" for key in FINGERPRINT_KEYS
               if (key in saved or key in now) and saved.get(key) != now.get(key)]
    if changed:
        keys = [key for key in FINGERPRINT_KEYS if (key in saved or key in now) and saved.get(key) != now.get(key)]
        restore = "; ".join(_REQUEST_FIELDS.get(key, key).format(old=saved.get(key)) for key in keys)
        raise ResumeRefused(
            f"Cannot resume from step {pair.step}: {', '.join(changed)} changed since that checkpoint, so the "
            "trainer would silently restart at step 0 and overwrite earlier checkpoints",
            where=str(pair.weights),
            fix=f"{restore}, then `ltx-pipeline resume`; or `ltx-pipeline resume --restart-training` to train "
                "this stage again from step 0 into a fresh output folder (the old checkpoints are kept)")
    return int(state.get("global_step", pair.step))


class _TrainerDump(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types
    """YAML's safe loader that reads the python tags of the trainer's ``yaml.dump(config.model_dump())`` as plain
    data (an enum as its value), never as objects."""


def _plain(loader: Any, _suffix: str, node: Any) -> Any:
    if isinstance(node, yaml.SequenceNode):
        items = loader.construct_sequence(node, deep=True)
        return items[0] if len(items) == 1 else items  # an enum: apply(Enum, [value])
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    return loader.construct_scalar(node)


_TrainerDump.add_multi_constructor("tag:yaml.org,2002:python/", _plain)


def check_same_settings(pair: CheckpointPair, config: Mapping[str, Any], output_dir: Path) -> None:
    """Refuses to resume a stage whose training settings changed since its last launch (#49).

    The trainer saved the config it ran with as ``training_config.yaml``; a resumed stage goes on with those
    settings, never with another learning rate, batch or quantization an upstream re-run (an edited run.yaml,
    another autotune winner) put in its config. ``resume --apply-fix`` (the user's own choice) does not ask.

    Raises:
        ResumeRefused: a kept setting (``ltx.stage_settings.KEPT_SETTINGS``) differs.
    """
    started = output_dir / "training_config.yaml"
    try:
        launched = yaml.load(started.read_text(encoding="utf-8"), Loader=_TrainerDump)  # noqa: S506 - safe + tags
    except (OSError, yaml.YAMLError):
        return  # no readable record of its settings (a trainer that writes none): nothing to hold it to
    changed = changed_settings(launched, config) if isinstance(launched, dict) else []
    if changed:
        raise ResumeRefused(
            f"Cannot resume from step {pair.step}: the stage's settings changed since it was launched "
            f"({'; '.join(changed)}); a stage with checkpoints goes on with the settings it trained with",
            where=str(started),
            fix="set them back in run.yaml, then `ltx-pipeline resume`; or `ltx-pipeline resume --restart-training` "
                "to train this stage again from step 0 with the new settings (the old checkpoints are kept); or a new "
                "run with them (`ltx-pipeline run --run NEW ...`)")


# Where each trainer fingerprint field comes from in the run request (run.yaml), so the fix names
# what the user can change: config.yaml itself is regenerated from run.yaml.
_REQUEST_FIELDS = {
    "lora_rank": "set `rank: {old}` back in run.yaml (or `ltx-pipeline run --run NAME --rank {old}`)",
    "training_mode": "set `training_mode: {old}` back in run.yaml (or `--training-mode {old}`)",
    "optimizer_type": "the optimizer was {old} (chosen by the plan's tier and autotune); keep the run's "
                      "--effective-batch, --buckets and GPUs as they were so autotune keeps it",
    "scheduler_type": "the scheduler was {old} (from the mode's template); use the same --mode and trainer "
                      "checkout",
}


def refuse_incompatible_checkpoints(config_path: Path, checkpoints_dir: Path, final_step: int) -> None:
    """Refuse now, before any heavy phase, when an unfinished stage's checkpoint cannot be resumed.

    Raises:
        ResumeRefused: the newest complete pair's training state differs from the config's fingerprint.
    """
    pair = latest_pair(checkpoints_dir)
    if pair is None or pair.step >= final_step:
        return
    check_compatible(pair, load_config_view(config_path))


def set_aside(output_dir: Path, *, workspace: Path) -> Path | None:
    """Move a stage's output folder aside (kept, never deleted) so its training starts fresh.

    Returns:
        Where the old folder now is, or None when there was nothing to keep.
    """
    if not output_dir.is_dir() or not any(output_dir.iterdir()):
        return None
    if workspace.resolve() not in output_dir.resolve().parents:
        raise ResumeRefused(f"{output_dir} is outside the workspace", where=str(output_dir),
                            fix="keep run outputs inside the workspace")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = output_dir.with_name(f"{output_dir.name}.kept-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = output_dir.with_name(f"{output_dir.name}.kept-{stamp}-{counter}")
    output_dir.rename(target)
    return target


def patch_resume(config_path: Path, pair: CheckpointPair, *, workspace: Path) -> list[PatchRecord]:
    """Point ``model.load_checkpoint`` at the pair's weights (and let the trainer use its state).

    A chained stage warm-starts with ``checkpoints.no_resume: true``; resuming its *own* checkpoint
    needs the state, so that flag is turned off in the same patch.

    Returns:
        The patch records (dotted path, old, new, reason).
    """
    from ltx_pipeline.ltx.config_patch import Patch, apply_patches  # the patcher loads ruamel: only when patching

    text = config_path.read_text(encoding="utf-8")
    reason = f"resume from step {pair.step}"
    patches = [Patch("model.load_checkpoint", str(pair.weights), reason)]
    if read_config_view(load_yaml(text), where=str(config_path)).checkpoints.no_resume:
        patches.append(Patch("checkpoints.no_resume", False, reason))
    patched, records = apply_patches(text, patches)
    atomic_write(config_path, patched, root=workspace)
    return records


@dataclass(frozen=True)
class PlannedStart:
    """How config_patch made a stage start: its warm-start weights (None: from the base model) and whether
    the trainer may resume a state from them."""

    load_checkpoint: str | None
    no_resume: bool

    def differs(self, view: TrainerConfigView) -> dict[str, Any]:
        """The patch paths whose value in ``view`` is not the planned one, with the planned value."""
        planned = {"model.load_checkpoint": self.load_checkpoint, "checkpoints.no_resume": self.no_resume}
        now = {"model.load_checkpoint": view.model.load_checkpoint, "checkpoints.no_resume": view.checkpoints.no_resume}
        return {path: value for path, value in planned.items() if now[path] != value}


def restore_planned_start(config_path: Path, planned: PlannedStart | Mapping[str, Any], *,
                          workspace: Path) -> list[PatchRecord]:
    """Undo ``patch_resume`` for a stage that trains again from step 0 (``--restart-training``).

    A resume pointed ``model.load_checkpoint`` at the stage's own checkpoint, in the folder a restart moves
    aside: left as it is, the restarted trainer would load a file that is gone (or, for a warm-starting stage,
    skip its warm start). ``planned``: the values config_patch wrote (or the template's), or them by dotted path.

    Returns:
        The patch records; none when the config already starts as planned.
    """
    from ltx_pipeline.ltx.config_patch import Patch, apply_patches  # the patcher loads ruamel: only when patching

    if not isinstance(planned, PlannedStart):
        planned = PlannedStart(planned.get("model.load_checkpoint"), bool(planned.get("checkpoints.no_resume")))
    text = config_path.read_text(encoding="utf-8")
    changes = planned.differs(read_config_view(load_yaml(text), where=str(config_path)))
    if not changes:
        return []
    reason = "--restart-training: the stage starts as planned, from step 0"
    patched, records = apply_patches(text, [Patch(path, value, reason) for path, value in changes.items()])
    atomic_write(config_path, patched, root=workspace)
    return records
