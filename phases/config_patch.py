"""Config-patch phase: copy the mode's template into the run and patch it, comments preserved.

The template comes from the backend (the trainer checkout's ``configs/`` for ``ltx``) and is only
read; each stage gets its own ``config.yaml`` (chained runs: ``config.stage-K.yaml``) patched with
the plan's settings through one comment-preserving round trip, so ``diff template config`` shows
only the patched lines. Every patch is recorded (dotted path, old, new, reason); later phases
(autotune's winner, resume) patch through the same mechanism.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltx_pipeline.checkpoints.files import weights_file_name
from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import file_digest
from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.audio_choice import trained_mode, video_only_patches
from ltx_pipeline.ltx.buckets import parse_bucket
from ltx_pipeline.ltx.condition_geometry import Geometry, fit_training_condition
from ltx_pipeline.ltx.config_patch import Patch, StagePaths, apply_patches, patches_for_stage, render_diff
from ltx_pipeline.ltx.config_values import config_value
from ltx_pipeline.ltx.hub import hub_patches
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.ltx.recipe import Recipe, Stage, planned_stages
from ltx_pipeline.ltx.user_settings import setting_patches
from ltx_pipeline.ltx.validation_sources import Candidate, choose_sources
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs, StageConfig
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.prepare import PrepareOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.phase_context import LtxContext
from ltx_pipeline.preprocessing.run import model_paths
from ltx_pipeline.validation_media import candidates_from_rows, materialize_samples, template_samples
from ltx_pipeline.workspace import atomic_write
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PHASE", "stage_config_file", "stage_output_dir"]


def stage_config_file(run_root: Path, stage: int, stages: int) -> Path:
    """``stages``: the planned stages; a stage past them continues a finished training (``continue-N``)."""
    if stage > stages:
        return run_root / f"config.continue-{stage - stages}.yaml"
    return run_root / ("config.yaml" if stages == 1 else f"config.stage-{stage}.yaml")


def stage_output_dir(run_root: Path, stage: int, stages: int) -> Path:
    if stage > stages:
        return run_root / "outputs" / f"continue-{stage - stages}"
    return run_root / "outputs" if stages == 1 else run_root / "outputs" / f"stage-{stage}"


class ConfigPatchPhase:
    name = "config_patch"
    heavy = False
    outputs_type = ConfigPatchOutputs

    def fingerprint(self, ctx: LtxContext) -> dict[str, Any]:
        template = ctx.backend.template(ctx.output(PlanOutputs).recipe.template)
        return {"plan": ctx.output_digest("plan"), "data_check": ctx.output_digest("data_check"),
                "template": file_digest(template), "backend": ctx.request.backend}

    def run(self, ctx: LtxContext) -> PhaseResult[ConfigPatchOutputs]:
        ctx.narrate("Copying the mode's example config into the run and patching it with the plan's settings; "
                    "the template itself is never edited.")
        plan = ctx.output(PlanOutputs)
        recipe = plan.recipe
        recipe_data = plan.to_stored()["recipe"]  # the ltx patch rules read the approved recipe as plain JSON data
        data = ctx.output(DataCheckOutputs)
        template = ctx.backend.template(recipe.template)
        template_text = template.read_text(encoding="utf-8")
        model_path, encoder_path = model_paths(ctx)
        wandb = ctx.output(ProbeOutputs).host.wandb_credentials
        # Continuations are named apart: the planned names never move.
        stages = planned_stages(recipe_data["stages"])
        configs = []
        previous_weights: str | None = None
        for stage in recipe.stages:
            index = stage.index
            output_dir = stage_output_dir(ctx.paths.root, index, stages)
            paths = StagePaths(model_path=model_path, text_encoder_path=encoder_path,
                               preprocessed_data_root=data.stages[index - 1].preprocessed_root,
                               output_dir=str(output_dir))
            video_only = plan.video_only  # the plan's audio choice
            patches = patches_for_stage(recipe_data, index, mode=recipe.mode, paths=paths, trigger=ctx.request.trigger,
                                        wandb=wandb, previous_stage_weights=previous_weights,
                                        describe_audio=False if video_only else None)
            if video_only:
                patches += video_only_patches(recipe.training_mode)
            if ctx.request.push_to_hub and stage is recipe.stages[-1]:  # only the last stage's end is the result
                patches += hub_patches(ctx.request.push_to_hub)
            text, records = apply_patches(template_text, patches)
            fitted = _fitted_condition_patches(ctx, plan, template, stage)
            if fitted:  # after the prompt rewrite: the samples are replaced whole, from the user's rows
                text, filled = apply_patches(text, fitted)
                records = [*records, *filled]
            if ctx.request.config_set:  # the user's own values (--set) come last: theirs is the final word
                text, own = apply_patches(text, setting_patches(ctx.request.config_set))
                records = [*records, *own]
            config_file = stage_config_file(ctx.paths.root, index, stages)
            atomic_write(config_file, text, root=ctx.workspace)
            configs.append(StageConfig(stage=index, config=str(config_file), template=str(template),
                                       patches=tuple(records),
                                       diff=render_diff(template_text, text, str(template), str(config_file)),
                                       output_dir=str(output_dir)))
            previous_weights = str(output_dir / "checkpoints" / _final_weights_name(recipe, stage))
        return PhaseResult(ConfigPatchOutputs(configs=tuple(configs), model_path=model_path,
                                              text_encoder_path=encoder_path))

    def summary(self, outputs: ConfigPatchOutputs) -> str:
        configs = outputs.configs
        patched = sum(len(c.patches) for c in configs)
        names = ", ".join(Path(c.config).name for c in configs)
        return f"{names} written from {Path(configs[0].template).name} with {patched} recorded patch(es)"


def _fitted_condition_patches(ctx: LtxContext, plan: PlanOutputs, template: Path, stage: Stage) -> list[Patch]:
    """The template's condition geometry fitted to the stage's buckets (``ltx.condition_geometry``), and the
    validation samples with their conditions from the rows the plan chose (their media derived into
    ``<run>/validation/``), or validation off (``--validation-media none``)."""
    values = load_yaml(template.read_text(encoding="utf-8")) or {}
    shapes, template_dims = template_samples(template)
    buckets = [parse_bucket(b, where="recipe.stages") for b in stage.buckets]
    smallest = min((Geometry(b.width, b.height, b.frames) for b in buckets),
                   key=lambda g: (g.frames, g.width * g.height))
    template_geometry = Geometry.of(template_dims)
    shipped = config_value(values, "training_strategy.video.conditions") or []
    trained = [fit_training_condition(dict(c), smallest, template_geometry) for c in shipped]
    patches = []
    if trained != shipped:
        patches.append(Patch("training_strategy.video.conditions", trained,
                             f"the template's prefix/suffix/crop sized for {'x'.join(map(str, template_dims))}, "
                             f"fitted to the smallest bucket {smallest.width}x{smallest.height}x{smallest.frames}"))
    planned = plan.validation
    if planned is None or not planned.needs:
        return patches
    if planned.validation_off:
        return [*patches, Patch("validation.interval", None, "--validation-media none: no validation in training")]
    candidates = _prepared_candidates(ctx, plan)
    mode = trained_mode(get_mode(ctx.request.mode), plan.audio)
    chosen = choose_sources([list(s.get("conditions") or []) for s in shapes], candidates,
                            video_media=mode.video_media, choice=planned.choice,
                            prefer=[os.path.realpath(s.source) for s in planned.samples])
    if chosen.blocker:  # the plan found rows; the prepared dataset has none that qualifies
        raise BadDataset(chosen.blocker.removeprefix("validation: "), where="validation.samples",
                         fix="add such rows, or `ltx-pipeline resume` after setting validation_media in run.yaml")
    built = materialize_samples(chosen, shapes, {c.source: c.caption for c in candidates}, smallest=smallest,
                                template_geometry=template_geometry, trained=trained, trigger=ctx.request.trigger,
                                out_dir=ctx.paths.root / "validation", workspace=ctx.workspace)
    rows = ", ".join(f"sample {s.sample + 1} from {Path(s.source).name}" for s in chosen.samples)
    reason = f"validation conditions from your data ({rows})" if rows else (chosen.note or "validation samples")
    return [*patches, Patch("validation.samples", built.samples, reason)]


def _prepared_candidates(ctx: LtxContext, plan: PlanOutputs) -> list[Candidate]:
    """The prepared dataset's rows (holdout file first) as validation candidates."""
    facts = {**ctx.output(ProbeOutputs).clip_frames.facts_plain()}
    prepare = ctx.output(PrepareOutputs) if ctx.has_output("prepare") else None
    if prepare is not None and prepare.prepared:
        facts.update(prepare.clip_frames.facts_plain())
        holdout = prepare.holdout_file
    else:
        holdout = ctx.request.holdout_file
    left_out = plan.audio.left_out if plan.audio is not None else ()
    candidates: list[Candidate] = []
    if holdout and Path(holdout).is_file():
        candidates += candidates_from_rows(read_metadata_rows(Path(holdout)), Path(holdout).parent, facts,
                                           held_out=True, left_out=left_out)
    metadata = ctx.output(DataCheckOutputs).metadata_file
    if metadata:
        candidates += candidates_from_rows(read_metadata_rows(Path(metadata)), Path(metadata).parent, facts,
                                           left_out=left_out)
    return candidates


def _final_weights_name(recipe: Recipe, stage: Stage) -> str:
    """The trainer always saves a last checkpoint at the final step (facts §4.7), counted from the
    stage's own start (a warm-started stage's trainer starts at step 0)."""
    return weights_file_name(recipe.training_mode, stage.steps or recipe.steps)


PHASE = ConfigPatchPhase()
