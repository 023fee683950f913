"""Config-patch phase: copy the mode's template into the run and patch it, comments preserved.

The template comes from the backend (the trainer checkout's ``configs/`` for ``ltx``) and is only
read; each stage gets its own ``config.yaml`` (chained runs: ``config.stage-K.yaml``) patched with
the plan's settings through one comment-preserving round trip, so ``diff template config`` shows
only the patched lines. Every patch is recorded (dotted path, old, new, reason); later phases
(autotune's winner, resume) patch through the same mechanism.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ltx_pipeline.engine import PhaseResult
from ltx_pipeline.engine.fingerprint import file_digest
from ltx_pipeline.ltx.audio_choice import video_only_patches
from ltx_pipeline.ltx.checkpoint_files import weights_file_name
from ltx_pipeline.ltx.config_patch import StagePaths, apply_patches, patches_for_stage, render_diff
from ltx_pipeline.ltx.recipe import Recipe, Stage, planned_stages
from ltx_pipeline.outputs.config_patch import ConfigPatchOutputs, StageConfig
from ltx_pipeline.outputs.data_check import DataCheckOutputs
from ltx_pipeline.outputs.plan import PlanOutputs
from ltx_pipeline.outputs.probe import ProbeOutputs
from ltx_pipeline.steps.context import LtxContext
from ltx_pipeline.steps.preprocess import model_paths
from ltx_pipeline.workspace import atomic_write

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
                                        backend_knobs=getattr(ctx.backend, "config_knobs", None),
                                        describe_audio=False if video_only else None)
            if video_only:
                patches += video_only_patches(recipe.training_mode)
            text, records = apply_patches(template_text, patches)
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


def _final_weights_name(recipe: Recipe, stage: Stage) -> str:
    """The trainer always saves a last checkpoint at the final step (facts §4.7), counted from the
    stage's own start (a warm-started stage's trainer starts at step 0)."""
    return weights_file_name(recipe.training_mode, stage.steps or recipe.steps)


PHASE = ConfigPatchPhase()
