"""Which patches turn a mode's template into one stage's trainer config (the skill's patching rules).

Owns ``StagePaths`` and ``patches_for_stage``: from an approved recipe (``Recipe.to_dict()``) it
lists, each with its reason, the four required absolute paths, the tier's knobs, rank and alpha
(identical across stages), steps, the stage's learning rate, checkpoint and validation cadence,
validation dims equal to the largest training bucket, validation prompts with the trigger word
(and a sound description for audio runs), W&B, the chained-stage warm start, and backend knobs.
Values equal to the template's are emitted anyway; ``apply_patches`` skips them without a record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.buckets import parse_bucket
from ltx_pipeline.ltx.config_patch._records import Patch, PromptRewrite
from ltx_pipeline.ltx.modes import get_mode

__all__ = ["KNOB_PATHS", "StagePaths", "patches_for_stage"]

# Where each recipe knob lives in the trainer config (facts §1.6-1.7).
KNOB_PATHS: dict[str, str] = {
    "optimizer_type": "optimization.optimizer_type",
    "enable_gradient_checkpointing": "optimization.enable_gradient_checkpointing",
    "batch_size": "optimization.batch_size",
    "gradient_accumulation_steps": "optimization.gradient_accumulation_steps",
    "quantization": "acceleration.quantization",
    "load_text_encoder_in_8bit": "acceleration.load_text_encoder_in_8bit",
    "offload_optimizer_during_validation": "acceleration.offload_optimizer_during_validation",
    "mixed_precision_mode": "acceleration.mixed_precision_mode",
}


@dataclass(frozen=True)
class StagePaths:
    """The four paths every stage config needs, all absolute (the trainer resolves relative ones
    against its working directory, which is not the run folder).

    Attributes:
        model_path: the LTX checkpoint (.safetensors).
        text_encoder_path: the Gemma directory (or a split pack's text-encoder file).
        preprocessed_data_root: the ``.precomputed`` folder for this stage's buckets.
        output_dir: where this stage writes checkpoints and samples.
    """

    model_path: str
    text_encoder_path: str
    preprocessed_data_root: str
    output_dir: str

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, str) or not value or not Path(value).is_absolute():
                raise BadInput(f"{item.name} must be an absolute path, got {value!r}", where=item.name,
                               fix="pass the full path, e.g. /models/ltx-2.safetensors")


def patches_for_stage(recipe: dict[str, Any], stage_index: int, *, mode: str, paths: StagePaths,
                      trigger: str | None, wandb: bool, previous_stage_weights: str | None,
                      backend_knobs: dict[str, Any] | None = None,
                      describe_audio: bool | None = None) -> list[Patch]:
    """The patches that make one stage's config from the mode's template.

    Args:
        recipe: ``Recipe.to_dict()`` of the approved plan.
        stage_index: the stage's 1-based ``index`` as in ``recipe["stages"]``.
        mode: the mode name (e.g. ``t2v``); sets the W&B project/tag, and whether prompts must
            describe sound (modes that generate audio).
        paths: the stage's absolute paths.
        trigger: the LoRA trigger word put into the validation prompts; None keeps them.
        wandb: whether W&B logging is on (the probe found credentials).
        previous_stage_weights: for a stage that warm-starts, the absolute path of the previous
            stage's final ``lora_weights_step_*.safetensors``; None for the first stage.
        backend_knobs: extra dotted path -> value pairs a backend needs, applied last.
        describe_audio: whether validation prompts describe sound; None: whether the mode generates audio
            (a video-only run of an audio+video mode passes False).

    Returns:
        The patches in order, each with a short reason.

    Raises:
        BadInput: unknown stage, a warm-starting stage without (or a first stage with) previous
            weights, a relative weights path, or a recipe knob with no known config path.
    """
    stages = {stage["index"]: stage for stage in recipe["stages"]}
    if stage_index not in stages:
        raise BadInput(f"The plan has no stage {stage_index}", where="stage",
                       fix="use one of " + ", ".join(str(i) for i in sorted(stages)))
    stage = stages[stage_index]
    # A video-only run of a template that generates audio: its prompts' sound sentences go (#43).
    strip_audio = describe_audio is False and get_mode(mode).generates_audio
    if describe_audio is None:
        describe_audio = get_mode(mode).generates_audio
    return [*_required_patches(paths, stage), *_knob_patches(recipe), *_training_mode_patches(recipe),
            *_schedule_patches(recipe, stage), *_training_state_patches(recipe),
            *_prompt_patches(trigger, describe_audio, strip_audio), *_wandb_patches(mode, wandb),
            *_warm_start_patches(stage, previous_stage_weights),
            *(Patch(path, value, "backend setting") for path, value in (backend_knobs or {}).items())]


def _required_patches(paths: StagePaths, stage: dict[str, Any]) -> list[Patch]:
    return [
        Patch("model.model_path", paths.model_path, "required: the local model checkpoint"),
        Patch("model.text_encoder_path", paths.text_encoder_path, "required: the local Gemma text encoder"),
        Patch("data.preprocessed_data_root", paths.preprocessed_data_root,
              f"required: this run's preprocessed data ({'+'.join(stage['buckets'])})"),
        Patch("output_dir", paths.output_dir, "required: outputs inside the run folder"),
    ]


def _training_mode_patches(recipe: dict[str, Any]) -> list[Patch]:
    patches = [Patch("model.training_mode", recipe["training_mode"], f"plan: {recipe['training_mode']} training")]
    if recipe["training_mode"] == "lora":
        patches += [
            Patch("lora.rank", recipe["rank"], f"plan: LoRA rank for the {recipe['tier_name']}"),
            Patch("lora.alpha", recipe["rank"], "alpha = rank (scaling 1.0), the same in every stage"),
        ]
    return patches


def _training_state_patches(recipe: dict[str, Any]) -> list[Patch]:
    if recipe["training_mode"] != "lora":
        return []
    # The trainer's default state ("minimal") holds no optimizer: a resume starts a fresh AdamW at the
    # configured rate and the chained schedule decays from there, off the uninterrupted curve (#43). A
    # LoRA's optimizer state is small next to the model (the trainer's docs: ~800 MB), so keep it.
    return [Patch("checkpoints.save_training_state", "full",
                  "resume keeps the optimizer and the learning-rate schedule (minimal restarts both)")]


def _prompt_patches(trigger: str | None, describe_audio: bool, strip_audio: bool) -> list[Patch]:
    return [
        Patch("validation.samples", PromptRewrite(trigger, describe_audio, strip_audio),
              _prompt_reason(trigger, describe_audio, strip_audio)),
        Patch("validation.prompts", PromptRewrite(trigger, describe_audio, strip_audio),
              _prompt_reason(trigger, describe_audio, strip_audio)),
    ]


def _wandb_patches(mode: str, wandb: bool) -> list[Patch]:
    patches = [Patch("wandb.enabled", wandb, "W&B credentials found" if wandb else "no W&B credentials: off")]
    if wandb:
        patches += [Patch("wandb.project", f"ltx2-{mode}", "W&B project per mode (skill convention)"),
                    Patch("wandb.tags", [mode], "W&B tag: the mode")]
    return patches


def _knob_patches(recipe: dict[str, Any]) -> list[Patch]:
    unknown = sorted(set(recipe["knobs"]) - set(KNOB_PATHS))
    if unknown:
        raise BadInput(f"Recipe knob(s) {', '.join(unknown)} have no place in the trainer config",
                       where="recipe.knobs", fix="use knobs named " + ", ".join(KNOB_PATHS))
    return [Patch(KNOB_PATHS[name], value, f"{recipe['tier_name']}: {name}")
            for name, value in recipe["knobs"].items()]


def _schedule_patches(recipe: dict[str, Any], stage: dict[str, Any]) -> list[Patch]:
    # A continuation stage trains its own steps (the extra ones), every planned stage the recipe's.
    steps = stage.get("steps") or recipe["steps"]
    interval, keep = recipe["checkpoint_interval"], recipe["keep_last_n"]
    keep_reason = "plan: checkpoints kept"
    if keep == 1 and interval and steps % interval == 0:
        # Facts §4.7: the final save repeats the last interval save, and keep_last_n 1 then
        # deletes the final weights. Two entries in the list are the same file, so 2 keeps it.
        keep, keep_reason = 2, "keep_last_n 1 would delete the final weights (steps divisible by interval)"
    dims = parse_bucket(recipe["validation_dims"], where="recipe.validation_dims")
    return [
        Patch("optimization.steps", steps, f"plan: continue from step {stage['start_step']} with {steps} more steps"
              if stage.get("start_step") else "plan: optimizer steps"),
        Patch("optimization.learning_rate", float(stage["learning_rate"]),
              f"plan: stage {stage['index']} learning rate"),
        Patch("checkpoints.interval", interval, "plan: checkpoint interval"),
        Patch("checkpoints.keep_last_n", keep, keep_reason),
        Patch("validation.interval", recipe["validation_interval"], "plan: validation interval"),
        Patch("validation.video_dims", [dims.width, dims.height, dims.frames],
              "validation at the largest training bucket"),
    ]


def _warm_start_patches(stage: dict[str, Any], previous: str | None) -> list[Patch]:
    if not stage["warm_start_from_previous"]:
        if previous is not None:
            raise BadInput(f"Stage {stage['index']} does not warm-start, but previous weights were given",
                           where="previous_stage_weights", fix="pass None for the first stage")
        return [Patch("model.load_checkpoint", None, "fresh start")]
    if not previous or not Path(previous).is_absolute():
        raise BadInput(f"Stage {stage['index']} warm-starts from the previous stage's final weights, "
                       f"got {previous!r}", where="previous_stage_weights",
                       fix="pass the absolute path of the previous stage's highest-step "
                           "lora_weights_step_*.safetensors")
    if stage.get("start_step"):  # a continuation of a finished training (ltx.recipe's _continuations)
        return [
            Patch("model.load_checkpoint", previous, f"continue from the final weights of step {stage['start_step']}"),
            Patch("checkpoints.no_resume", True, "a fresh schedule over the extra steps: do not restore the "
                  "finished training's step counter and scheduler"),
        ]
    return [
        Patch("model.load_checkpoint", previous, f"warm start from stage {stage['index'] - 1}'s final weights"),
        Patch("checkpoints.no_resume", True,
              "start at step 0: do not restore the previous stage's step counter and scheduler"),
    ]


def _prompt_reason(trigger: str | None, audio: bool, strip_audio: bool = False) -> str:
    parts = [f"trigger word {trigger!r}"] if trigger else []
    if audio:
        parts.append("sound described as in training captions")
    if strip_audio:
        parts.append("sentences about sound removed (video only: the samples have no sound)")
    return "validation prompts: " + (", ".join(parts) if parts else "kept")
