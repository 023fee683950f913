"""What a stage's next launch starts from: its newest checkpoint, step 0 again, a continuation, a fix applied.

Owns the train phase's side of ``training.resume`` and ``training.fixes``: ``prepare_resume`` points a
retried stage at its newest complete checkpoint pair (refusing one the trainer would silently restart
from), restarts it from step 0 on ``--restart-training`` (its outputs kept aside, its config back to the
planned start), or says what a continuation's first launch does; ``apply_fix`` applies ``failure.json``'s
proposed diff on ``resume --apply-fix``. Every config change goes through the config-patch mechanism
and is narrated as ``path old -> new (reason)``.
"""

from __future__ import annotations

from pathlib import Path

from ltx_pipeline.checkpoints.discovery import latest_pair
from ltx_pipeline.checkpoints.files import resume_restores
from ltx_pipeline.ltx.config_patch import Patch, PatchRecord, apply_patches
from ltx_pipeline.ltx.trainer_config.view import load_config_view
from ltx_pipeline.trainer_log import canonical_kind
from ltx_pipeline.training.fixes import FixProposal
from ltx_pipeline.training.resume import (
    PlannedStart,
    check_compatible,
    check_same_settings,
    patch_resume,
    restore_planned_start,
    set_aside,
)
from ltx_pipeline.training.stage import TrainingStage
from ltx_pipeline.workspace import atomic_write

__all__ = ["apply_fix", "planned_start", "prepare_resume"]


def prepare_resume(stage: TrainingStage, *, retried: bool) -> int | None:
    """Patch the stage's config for this launch; the step a resume goes on from (None: none).

    Raises:
        ResumeRefused: the newest pair's state, or the stage's settings, no longer match the config.
    """
    ctx = stage.ctx
    if stage.start_step and not retried and not stage.restart:
        _announce_continuation(stage)
        return None
    if stage.restart:
        _restart(stage)
        return None
    pair = latest_pair(stage.checkpoints)
    if pair is None:
        if retried:
            ctx.narrate(f"Stage {stage.index} has no complete checkpoint pair yet: relaunching from the start.")
        return None
    step = check_compatible(pair, stage.view())
    if not ctx.options.apply_fix:  # a fix the user applied is a setting they chose to change
        check_same_settings(pair, stage.values(), stage.output_dir)
    _narrate_patches(stage, patch_resume(stage.config, pair, workspace=ctx.workspace))
    ctx.narrate(f"Stage {stage.index} resumes from its checkpoint at step {step} ({pair.weights.name}); "
                + resume_restores(stage.view().checkpoints.save_training_state))
    return step


def _restart(stage: TrainingStage) -> None:
    """``--restart-training``: the stage's outputs set aside, its config back to how it was planned to start."""
    ctx = stage.ctx
    kept = set_aside(stage.output_dir, workspace=ctx.workspace)
    _narrate_patches(stage, restore_planned_start(stage.config, planned_start(stage), workspace=ctx.workspace))
    ctx.journal.forget_stage(stage.index)  # its metrics and checkpoints are the old training's
    stage.restarted = True
    if kept is not None:
        ctx.narrate(f"--restart-training: stage {stage.index} trains again from step 0 into "
                    f"{stage.output_dir}; its previous outputs are kept in {kept}.")


def planned_start(stage: TrainingStage) -> PlannedStart:
    """How config_patch made this stage start: its recorded warm start, else the template's values."""
    template = Path(stage.config_entry.template)
    view = load_config_view(template) if template.is_file() else None
    planned = PlannedStart(view.model.load_checkpoint if view else None,
                           view.checkpoints.no_resume if view else False)
    for record in stage.config_entry.patches:
        if record.path == "model.load_checkpoint":
            planned = PlannedStart(record.new, planned.no_resume)
        elif record.path == "checkpoints.no_resume":
            planned = PlannedStart(planned.load_checkpoint, bool(record.new))
    return planned


def _announce_continuation(stage: TrainingStage) -> None:
    """Say what a continuation's first launch does: the issue's words, and the trainer's own numbers."""
    config = stage.view()
    steps, start = config.optimization.steps, stage.start_step
    stage.ctx.narrate(f"Stage {stage.index}/{stage.total}: continuing from step {start} to {start + steps}, "
                      f"warm-started from {config.model.load_checkpoint} with a fresh "
                      f"{config.optimization.scheduler_type} schedule over the {steps} extra steps from learning "
                      f"rate {config.optimization.learning_rate} (the trainer counts them 1-{steps}).")


def apply_fix(stage: TrainingStage) -> None:
    """``resume --apply-fix``: apply the stage's proposed diff from ``failure.json`` (then drop the file)."""
    ctx, record_file = stage.ctx, stage.ctx.paths.root / "failure.json"
    proposal = FixProposal.read(record_file)
    if proposal is None or proposal.stage != stage.index:
        ctx.narrate("--apply-fix: no proposed fix is recorded for this stage; retrying as is.")
        return
    kind = canonical_kind(proposal.kind)
    if not proposal.diff:
        ctx.narrate(f"--apply-fix: the last failure ({kind}) has no config diff; retrying as is.")
    else:
        text, records = apply_patches(stage.config.read_text(encoding="utf-8"),
                                      [Patch(c.path, c.new, f"fix: {kind}") for c in proposal.diff])
        atomic_write(stage.config, text, root=ctx.workspace)
        for record in records:
            ctx.warn(f"{stage.config.name}: patched {record.path} {record.old} -> {record.new} ({record.reason})")
    record_file.unlink()


def _narrate_patches(stage: TrainingStage, records: list[PatchRecord]) -> None:
    for record in records:
        stage.ctx.narrate(f"{stage.config.name}: {record.path} {record.old} -> {record.new} ({record.reason})")
