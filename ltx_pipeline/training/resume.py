"""Resume a stage from its checkpoints: find the newest complete pair, check it, patch the config.

Owns the trainer's resume rules as the engine applies them (facts §4.8): a checkpoint is a
*complete pair*, ``{lora|model}_weights_step_N.safetensors`` with ``training_state_step_N.pt`` of
the same step beside it (a ``.pt.tmp`` is an interrupted save, never a checkpoint). It also owns
what a retry would change: a failed launch's classification and its proposed fix, one rung of the
troubleshooting ladder as an exact config diff that ``resume --apply-fix`` applies. Resuming means
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.checkpoints.files import WEIGHTS_RE as _WEIGHTS_RE
from ltx_pipeline.errors import ResumeRefused
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.stage_settings import changed_settings
from ltx_pipeline.trainer_log import Failure, classify_failure, failure_tail
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["CheckpointPair", "FINGERPRINT_KEYS", "check_compatible", "check_same_settings", "checkpoint_pairs",
           "config_fingerprint", "failure_report", "latest_pair", "patch_resume", "proposed_diff", "read_state",
           "refuse_incompatible_checkpoints", "set_aside"]

FINGERPRINT_KEYS = ("optimizer_type", "scheduler_type", "training_mode", "lora_rank")


@dataclass(frozen=True)
class CheckpointPair:
    """Weights and the training state of the same step (``state`` None: weights only)."""

    step: int
    weights: Path
    state: Path | None

    @property
    def complete(self) -> bool:
        return self.state is not None


def checkpoint_pairs(checkpoints_dir: Path, *, complete_only: bool = True) -> list[CheckpointPair]:
    """Every checkpoint in ``checkpoints_dir`` by step (ascending); only complete pairs by default.

    The state file keeps the weights' zero padding (``_step_00020``), as the trainer looks it up.
    Empty state files are interrupted saves and do not count.
    """
    if not checkpoints_dir.is_dir():
        return []
    pairs = []
    for weights in checkpoints_dir.iterdir():
        match = _WEIGHTS_RE.match(weights.name)
        if match is None or not weights.is_file():
            continue
        state = checkpoints_dir / f"training_state_step_{match.group(2)}.pt"
        has_state = state.is_file() and state.stat().st_size > 0
        if has_state or not complete_only:
            pairs.append(CheckpointPair(int(match.group(2)), weights, state if has_state else None))
    return sorted(pairs, key=lambda p: p.step)


def latest_pair(checkpoints_dir: Path) -> CheckpointPair | None:
    """The newest complete pair, or None when no checkpoint can be resumed from."""
    pairs = checkpoint_pairs(checkpoints_dir)
    return pairs[-1] if pairs else None


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


def config_fingerprint(config: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint the trainer compares on resume, computed from a config mapping."""
    optimization = config.get("optimization") or {}
    model = config.get("model") or {}
    found = {"optimizer_type": optimization.get("optimizer_type", "adamw"),
             "scheduler_type": optimization.get("scheduler_type", "linear"),
             "training_mode": model.get("training_mode", "lora")}
    if found["training_mode"] == "lora":
        found["lora_rank"] = (config.get("lora") or {}).get("rank")
    return found


def check_compatible(pair: CheckpointPair, config: dict[str, Any]) -> int:
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


def check_same_settings(pair: CheckpointPair, config: dict[str, Any], output_dir: Path) -> None:
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

    check_compatible(pair, load_yaml(config_path.read_text(encoding="utf-8")) or {})


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


def patch_resume(config_path: Path, pair: CheckpointPair, *, workspace: Path) -> list[dict[str, Any]]:
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
    if ((load_yaml(text) or {}).get("checkpoints") or {}).get("no_resume"):
        patches.append(Patch("checkpoints.no_resume", False, reason))
    patched, records = apply_patches(text, patches)
    atomic_write(config_path, patched, root=workspace)
    return [r.to_dict() for r in records]


_START_PATHS = ("model.load_checkpoint", "checkpoints.no_resume")


def restore_planned_start(config_path: Path, planned: dict[str, Any], *, workspace: Path) -> list[dict[str, Any]]:
    """Undo ``patch_resume`` for a stage that trains again from step 0 (``--restart-training``).

    A resume pointed ``model.load_checkpoint`` at the stage's own checkpoint, in the folder a restart moves
    aside: left as it is, the restarted trainer would load a file that is gone (or, for a warm-starting stage,
    skip its warm start). ``planned`` holds the values config_patch wrote (or the template's), by dotted path.

    Returns:
        The patch records; none when the config already starts as planned.
    """
    from ltx_pipeline.ltx.config_patch import Patch, apply_patches  # the patcher loads ruamel: only when patching

    text = config_path.read_text(encoding="utf-8")
    current = load_yaml(text) or {}
    patches = [Patch(path, planned.get(path), "--restart-training: the stage starts as planned, from step 0")
               for path in _START_PATHS if config_value(current, path) != planned.get(path)]
    if not patches:
        return []
    patched, records = apply_patches(text, patches)
    atomic_write(config_path, patched, root=workspace)
    return [r.to_dict() for r in records]


def proposed_diff(failure: Failure, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The next rung of the failure's fix ladder as an exact config diff (dotted path, old, new).

    Fixes are ordered cheapest-first (OOM: batch 1, checkpointing, 8-bit optimizer, ..., cheaper
    validation), and the classifier drops rungs the config already satisfies, so applying one rung per
    failure walks down the ladder. Batch 1 comes with its gradient accumulation, which keeps the
    effective batch.
    """
    changes = failure.config_changes
    if not changes:
        return []
    take = changes[:2] if (changes[0].path == "optimization.batch_size" and len(changes) > 1
                           and changes[1].path == "optimization.gradient_accumulation_steps") else changes[:1]
    return [{"path": c.path, "old": config_value(config, c.path), "new": c.value, "reason": c.reason} for c in take]


def failure_report(log: Path, config: dict[str, Any], exit_code: int | None, signal: int | None,
                   stage: int) -> tuple[Failure, dict[str, Any], str]:
    """Classify a failed launch from the lines it wrote, and build the proposal and ``failure.md``.

    Only the lines after the last launch boundary count (the stage's log is appended across launches).

    Returns:
        (failure, proposal for ``failure.json`` (stage, kind, evidence, diff), markdown report).
    """
    tail = failure_tail(log)  # the lines `ltx-pipeline diagnose` reads too
    validation = config.get("validation") or {}
    failure = classify_failure(exit_code, signal, tail, config=config,
                               initial_validation=bool(validation.get("interval"))
                               and not validation.get("skip_initial_validation"))
    diff = proposed_diff(failure, config)
    proposal = {"stage": stage, "kind": failure.kind, "phase": failure.phase, "rank": failure.rank,
                "evidence": failure.evidence, "exit_code": exit_code, "signal": signal, "log": str(log), "diff": diff}
    where = ([f"- phase: {failure.phase}" + (f" (from: `{failure.phase_evidence}`)" if failure.phase_evidence else "")]
             if failure.phase else []) + ([f"- rank: {failure.rank}"] if failure.rank is not None else [])
    lines = [f"# Training failure: stage {stage}", "", f"- class: **{failure.kind}**", *where,
             f"- exit code: {exit_code}" + (f" (signal {signal})" if signal else ""), f"- log: {log}",
             f"- evidence: `{failure.evidence}`", "", "## Proposed fix"]
    if diff:
        lines += ["", "`ltx-pipeline resume --apply-fix` applies exactly this diff, re-validates and retries:", "",
                  "```diff", *(f"- {c['path']}: {json.dumps(c['old'])}\n+ {c['path']}: {json.dumps(c['new'])}"
                               for c in diff), "```", "", *(f"- {c['path']}: {c['reason']}" for c in diff)]
    else:
        lines += ["", "No config change is proposed; `ltx-pipeline resume` retries as is once the cause is fixed."]
    rest = [f for f in failure.fix if f.path is None or f.path not in {c["path"] for c in diff}]
    if rest:
        lines += ["", "## If that is not enough (in order)", ""]
        lines += [f"- `{f.path}: {json.dumps(f.value)}`: {f.reason}" if f.path else f"- {f.reason}" for f in rest]
    return failure, proposal, "\n".join(lines) + "\n"


