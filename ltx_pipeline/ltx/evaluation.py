"""What the post-train evaluation renders, and the eval config's patches (the skill's Phase 9).

Owns the three prompt sets and their conditions, and the patch list that turns a run's final
config into the eval config. Pure: rows in, prompts and patches out; nothing is read or written.

- ``in_distribution``: 3 training captions, chosen with seed 42, with the trigger word in front as
  preprocessing put it there.
- ``out_of_distribution``: the user's prompts, else 3 generic prompts with the trigger word
  (sound described for modes that generate audio).
- ``held_out``: up to 5 rows of the holdout file; none held out is said, never invented.

A mode with conditions (first frame, reference video, prefix, mask, ...) gets the shape of the
run config's own validation conditions with the media of the dataset row each prompt came from;
an out-of-distribution prompt, which has no row, borrows the conditions of a training row in turn
(recorded as its ``conditions_from``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.config_patch import Patch, PromptRewrite
from ltx_pipeline.ltx.metadata import resolve_media

__all__ = ["CATEGORIES", "EVAL_SEED", "EvalPrompt", "EvalSets", "caption_of", "eval_patches", "eval_sets",
           "generic_prompts", "render_order"]

CATEGORIES = ("in_distribution", "out_of_distribution", "held_out")
EVAL_SEED = 42
IN_DISTRIBUTION = 3
HELD_OUT_MAX = 5
_CAPTION_KEYS = ("caption", "text", "prompt", "captions", "description")
# Subjects the LoRA was not trained on: what it does outside its data is the question.
_GENERIC = (
    "A lighthouse on a rocky coast at dusk, waves breaking below, the camera slowly pushing in.",
    "A street market at night, people walking between lit stalls, filmed handheld.",
    "A close-up of hands kneading dough on a wooden table in warm morning light.",
)
# Which dataset column fills which condition field (the trainer's column names, facts §6.1).
_CONDITION_MEDIA: dict[tuple[str, str], tuple[str, ...]] = {
    ("first_frame", "image_or_video"): ("video", "media_path"),
    ("reference", "video"): ("reference_video", "ref_media_path"),
    ("reference", "audio"): ("reference_audio",),
    ("mask", "mask"): ("video_mask", "audio_mask"),
}


@dataclass(frozen=True)
class EvalPrompt:
    """One render: its category, prompt, the mode's conditions, and where the prompt came from."""

    category: str
    prompt: str
    source: str  # the dataset row's media path, "your --eval-prompt / eval_prompts" or "generic"
    conditions: list[dict[str, Any]] = field(default_factory=list)
    conditions_from: str | None = None  # the row whose media the conditions use, when not the source

    def sample(self) -> dict[str, Any]:
        """The trainer's ``ValidationSample`` for this prompt."""
        return {"prompt": self.prompt, **({"conditions": self.conditions} if self.conditions else {})}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EvalSets:
    """The prompts in render order, and for each category without prompts, why."""

    prompts: list[EvalPrompt]
    notes: dict[str, str]


def caption_of(row: dict[str, Any]) -> str | None:
    """The row's caption under any column name the trainer accepts, or None."""
    for key in _CAPTION_KEYS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def generic_prompts(trigger: str | None, describe_audio: bool) -> list[str]:
    """Three prompts about subjects outside any dataset, with the trigger word (and sound, for audio)."""
    rewrite = PromptRewrite(trigger, describe_audio)
    return [rewrite.rewrite(text) for text in _GENERIC]


def eval_sets(*, training: Sequence[tuple[dict[str, Any], Path]], held_out: Sequence[tuple[dict[str, Any], Path]],
              user_prompts: Sequence[str], trigger: str | None, describe_audio: bool,
              condition_shapes: list[dict[str, Any]], training_note: str | None = None,
              held_out_note: str | None = None) -> EvalSets:
    """The three prompt sets.

    Args:
        training: the training rows with the folder their media paths are relative to.
        held_out: the holdout rows, likewise.
        user_prompts: the user's out-of-distribution prompts (used as written).
        trigger: the LoRA's trigger word for the generic prompts; None: none.
        describe_audio: the mode generates audio, so generic prompts describe sound.
        condition_shapes: the run config's first validation sample's conditions (their types and
            settings); each prompt gets them with its row's media.
        training_note: why no training caption is readable, when ``training`` is empty.
        held_out_note: why nothing is held out, when ``held_out`` is empty.

    Returns:
        The prompts in render order (in-distribution, out-of-distribution, held-out) and a note for
        each empty category.
    """
    notes: dict[str, str] = {}
    captioned = [(row, base) for row, base in training if caption_of(row)]
    chosen = random.Random(EVAL_SEED).sample(captioned, min(IN_DISTRIBUTION, len(captioned)))
    prompts = [_from_row("in_distribution", row, base, condition_shapes, trigger) for row, base in chosen]
    if not chosen:
        notes["in_distribution"] = training_note or "no training row has a caption"
    texts = list(user_prompts)
    source = "your --eval-prompt / eval_prompts"
    if not texts:
        texts, source = generic_prompts(trigger, describe_audio), "generic"
    donors = chosen or captioned
    for index, text in enumerate(texts):
        conditions, donor = [], None
        if condition_shapes and donors:
            row, base = donors[index % len(donors)]
            conditions, donor = _conditions(condition_shapes, row, base), _media(row, base)
        prompts.append(EvalPrompt("out_of_distribution", text, source, conditions, donor))
    kept = [(row, base) for row, base in held_out if caption_of(row)][:HELD_OUT_MAX]
    prompts += [_from_row("held_out", row, base, condition_shapes, trigger) for row, base in kept]
    if not kept:
        notes["held_out"] = held_out_note or "the holdout file has no captioned row"
    return EvalSets(prompts, notes)


def render_order(prompts: Sequence[EvalPrompt]) -> list[tuple[str, int]]:
    """(category, number within it, from 1) for each prompt: its file is ``<category>/NN``."""
    seen: dict[str, int] = {}
    order = []
    for prompt in prompts:
        seen[prompt.category] = seen.get(prompt.category, 0) + 1
        order.append((prompt.category, seen[prompt.category]))
    return order


def eval_patches(values: dict[str, Any], *, weights: str, samples: list[dict[str, Any]], output_dir: str,
                 video_dims: list[int] | None = None) -> list[Patch]:
    """The patches that make the eval config from a run's final config (the skill's list).

    Args:
        values: the final config as ``yaml.safe_load`` reads it (to know which keys exist).
        weights: the final weights file (absolute).
        samples: the trainer's validation samples to render.
        output_dir: the eval's scratch output folder (absolute).
        video_dims: smaller validation dims for a retry after an out-of-memory; None keeps them.
    """
    validation = values.get("validation") or {}
    patches = [
        Patch("model.load_checkpoint", weights, "evaluate: the final weights"),
        Patch("checkpoints.no_resume", True, "evaluate: the weights only, not the training state (step 0)"),
        Patch("checkpoints.interval", None, "evaluate: no checkpoints (the trainer's forced last one is removed)"),
        Patch("optimization.steps", 1, "evaluate: one step, the least the trainer runs"),
        Patch("validation.interval", 2, "evaluate: render at step 0 only, before that step changes the weights"),
        Patch("validation.skip_initial_validation", False, "evaluate: the step-0 render is the evaluation"),
        Patch("validation.samples", samples, "evaluate: the category-tagged prompts"),
        Patch("output_dir", output_dir, "evaluate: a scratch folder; renders are moved into outputs/eval"),
        Patch("wandb.enabled", False, "evaluate: a one-step render is not a training run to log"),
    ]
    if validation.get("prompts"):
        patches.append(Patch("validation.prompts", [], "evaluate: the samples above replace the legacy prompts"))
    for legacy in ("images", "reference_videos"):
        if validation.get(legacy):
            patches.append(Patch(f"validation.{legacy}", None, "evaluate: conditions are on the samples"))
    if (values.get("hub") or {}).get("push_to_hub"):
        patches.append(Patch("hub.push_to_hub", False, "evaluate: nothing is uploaded"))
    if video_dims is not None:
        patches.append(Patch("validation.video_dims", video_dims, "evaluate: out of memory at the planned dims; "
                                                                   "retried once smaller"))
    return patches




def _media(row: dict[str, Any], base: Path) -> str | None:
    value = row.get("video") or row.get("media_path") or row.get("audio")
    return str(resolve_media(base, str(value))) if isinstance(value, str) and value.strip() else None


def _from_row(category: str, row: dict[str, Any], base: Path, shapes: list[dict[str, Any]],
              trigger: str | None) -> EvalPrompt:
    caption = caption_of(row) or ""
    # As the model saw it: preprocessing's --lora-trigger prepends "{trigger} " to every caption (facts §6).
    prompt = f"{trigger.strip()} {caption}" if trigger else caption
    return EvalPrompt(category, prompt, _media(row, base) or "(no media column)",
                      _conditions(shapes, row, base) if shapes else [])


def _conditions(shapes: list[dict[str, Any]], row: dict[str, Any], base: Path) -> list[dict[str, Any]]:
    """The shapes with this row's media in every media field (settings such as num_frames kept)."""
    filled = []
    for shape in shapes:
        condition = dict(shape)
        kind = str(condition.get("type"))
        for key in ("image_or_video", "video", "audio", "mask"):
            if key not in condition:
                continue
            columns = _CONDITION_MEDIA.get((kind, key)) or ((key,) if key != "mask" else ())
            if kind == "mask" and key == "mask":
                columns = ("video_mask",) if "video" in condition else ("audio_mask",)
            if key in ("video", "audio") and kind not in ("reference",):
                # the clip itself: its video, or for audio its audio file (else the video's sound track)
                columns = ("video", "media_path") if key == "video" else ("audio", "video", "media_path")
            value = next((row[c] for c in columns if isinstance(row.get(c), str) and row[c].strip()), None)
            if value is not None:
                condition[key] = str(resolve_media(base, value))
        filled.append(condition)
    return filled
