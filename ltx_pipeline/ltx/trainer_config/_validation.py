"""Mirror of the trainer's ``validation`` section: samples, their conditions, and the legacy keys.

Owns ``ValidationConfig`` with its validators in the trainer's order (facts §1.9): the before-step
that migrates ``guidance_scale`` / ``stg_scale`` / ``stg_mode``, the legacy ``images`` and
``reference_videos`` checks, the prompts-to-samples conversion, and the "something must be
generated" rule; plus ``ValidationSample`` and the validation conditions (discriminated on
``type``; distinct classes from the training conditions of the same names). Media paths inside
samples are never existence-checked, like the trainer; only the legacy lists are.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ltx_pipeline.ltx.trainer_config._paths import locate, path_policy
from ltx_pipeline.ltx.trainer_config._sections import ConfigBaseModel

__all__ = [
    "DEFAULT_NEGATIVE_PROMPT",
    "ValidationCondition",
    "ValidationConfig",
    "ValidationSample",
]

# The trainer's default negative prompt (a schema default, facts §1.9).
DEFAULT_NEGATIVE_PROMPT = (
    "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, "
    "grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, "
    "deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, "
    "wrong hand count, artifacts around text, inconsistent perspective, camera shake, incorrect depth of "
    "field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent "
    "lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny "
    "valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, wrong gaze direction, "
    "mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, "
    "off-sync audio, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward "
    "pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, flat lighting, "
    "inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts."
)


class _OneModality(ConfigBaseModel):
    """A condition that applies to exactly one of ``video`` or ``audio``."""

    video: str | None = None
    audio: str | None = None

    if TYPE_CHECKING:  # each subclass declares its own ``Literal`` tag (not a field of this base)
        type: str

    @model_validator(mode="after")
    def _exactly_one_modality(self) -> _OneModality:
        if (self.video is None) == (self.audio is None):
            raise ValueError(f"Exactly one of 'video' or 'audio' must be set for {self.type} condition")
        return self


class FirstFrameConditionConfig(ConfigBaseModel):
    """Condition on an image (or a video's first frame); always video."""

    type: Literal["first_frame"] = "first_frame"
    image_or_video: str | Path


class PrefixConditionConfig(_OneModality):
    """A clean prefix: ``num_frames`` pixel frames of a video, or ``duration`` seconds of audio."""

    type: Literal["prefix"] = "prefix"
    num_frames: int | None = Field(default=None, ge=1)
    duration: float | None = Field(default=None, gt=0)


class SuffixConditionConfig(_OneModality):
    """A clean suffix: ``num_frames`` pixel frames of a video, or ``duration`` seconds of audio."""

    type: Literal["suffix"] = "suffix"
    num_frames: int | None = Field(default=None, ge=1)
    duration: float | None = Field(default=None, gt=0)


class SpatialCropConditionConfig(ConfigBaseModel):
    """Outpainting: keep the pixel rectangle ``(y1, x1, y2, x2)`` of ``video``."""

    type: Literal["spatial_crop"] = "spatial_crop"
    video: str
    spatial_region: tuple[int, int, int, int] = Field(...)


class MaskConditionConfig(_OneModality):
    """Inpainting of ``video`` or ``audio`` with ``mask``."""

    type: Literal["mask"] = "mask"
    mask: str


class ReferenceConditionConfig(_OneModality):
    """IC-LoRA reference; the factors must match the preprocessing factors."""

    type: Literal["reference"] = "reference"
    downscale_factor: int = Field(default=1, ge=1)
    temporal_scale_factor: int = Field(default=1, ge=1)
    include_in_output: bool = False


class VideoToAudioConditionConfig(ConfigBaseModel):
    """The video is frozen conditioning; audio is generated."""

    type: Literal["video_to_audio"] = "video_to_audio"
    video: str


class AudioToVideoConditionConfig(ConfigBaseModel):
    """The audio is frozen conditioning; video is generated."""

    type: Literal["audio_to_video"] = "audio_to_video"
    audio: str


ValidationCondition = Annotated[
    FirstFrameConditionConfig
    | PrefixConditionConfig
    | SuffixConditionConfig
    | SpatialCropConditionConfig
    | MaskConditionConfig
    | ReferenceConditionConfig
    | VideoToAudioConditionConfig
    | AudioToVideoConditionConfig,
    Field(discriminator="type"),
]

_ALWAYS_VIDEO = ("first_frame", "spatial_crop", "video_to_audio")
_EITHER = ("prefix", "suffix", "mask", "reference")


def _targets(condition: ValidationCondition, modality: str) -> bool:
    """Whether a validation condition touches ``modality`` ("video" or "audio")."""
    if condition.type in _EITHER:
        return getattr(condition, modality) is not None
    if modality == "video":
        return condition.type in _ALWAYS_VIDEO
    return condition.type == "audio_to_video"


class ValidationSample(ConfigBaseModel):
    """One self-describing validation sample; ``video_dims``/``seed`` None inherit the section's."""

    prompt: str
    conditions: list[ValidationCondition] = Field(default_factory=list)
    video_dims: tuple[int, int, int] | None = None
    seed: int | None = None

    @model_validator(mode="after")
    def _frozen_modality_conflicts(self) -> ValidationSample:
        frozen = {c.type for c in self.conditions if c.type in ("video_to_audio", "audio_to_video")}
        if frozen == {"video_to_audio", "audio_to_video"}:
            raise ValueError(
                "Cannot have both video_to_audio and audio_to_video conditions — nothing would be generated"
            )
        for frozen_type, modality in (("video_to_audio", "video"), ("audio_to_video", "audio")):
            if frozen_type not in frozen:
                continue
            for condition in self.conditions:
                if condition.type != frozen_type and _targets(condition, modality):
                    raise ValueError(
                        f"Cannot use {modality}-targeting '{condition.type}' condition when {modality} "
                        f"is frozen ({frozen_type})"
                    )
        return self


def _migrate_guidance(values: dict[str, Any]) -> None:
    """Rewrite the deprecated scalar guidance keys in place into the per-modality keys."""
    if "guidance_scale" in values:
        if {"video_cfg_scale", "audio_cfg_scale"} & values.keys():
            raise ValueError(
                "guidance_scale is deprecated; use video_cfg_scale and audio_cfg_scale instead, "
                "and do not combine old and new CFG fields."
            )
        scale = values.pop("guidance_scale")
        values["video_cfg_scale"] = scale
        values["audio_cfg_scale"] = scale
    if {"stg_scale", "stg_mode"} & values.keys():
        if {"video_stg_scale", "audio_stg_scale"} & values.keys():
            raise ValueError(
                "stg_scale and stg_mode are deprecated; use video_stg_scale and audio_stg_scale instead, "
                "and do not combine old and new STG fields."
            )
        stg_scale = values.pop("stg_scale", 1.0)
        stg_mode = values.pop("stg_mode", "stg_av")
        if stg_mode not in {"stg_av", "stg_v"}:
            raise ValueError("stg_mode must be either 'stg_av' or 'stg_v'")
        values["video_stg_scale"] = stg_scale
        values["audio_stg_scale"] = stg_scale if stg_mode == "stg_av" else 0.0


def _check_legacy_paths(paths: list[str], what: str, info: ValidationInfo) -> None:
    """One legacy path per prompt, each existing unless the policy is relaxed."""
    prompt_count = len(info.data.get("prompts", []))
    if len(paths) != prompt_count:
        raise ValueError(f"Number of {what}s ({len(paths)}) must match number of prompts ({prompt_count})")
    policy = path_policy(info)
    if policy.relaxed:
        return
    for path in paths:
        if not locate(path, policy).exists():
            raise ValueError(f"{what[0].upper()}{what[1:]} path '{path}' does not exist")


class ValidationConfig(ConfigBaseModel):
    """Validation during training. Field order matters: ``prompts`` is validated before the legacy lists."""

    samples: list[ValidationSample] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    negative_prompt: str = DEFAULT_NEGATIVE_PROMPT
    images: list[str] | None = None
    reference_videos: list[str] | None = None
    reference_downscale_factor: int = Field(default=1, ge=1)
    video_dims: tuple[int, int, int] = (960, 544, 89)
    frame_rate: float = Field(default=24.0, gt=0)
    seed: int = 42
    inference_steps: int = Field(default=30, gt=0)
    interval: int | None = Field(default=100, gt=0)
    video_cfg_scale: float = Field(default=3.0, ge=1.0)
    audio_cfg_scale: float = Field(default=7.0, ge=1.0)
    video_stg_scale: float = Field(default=1.0, ge=0.0)
    audio_stg_scale: float = Field(default=1.0, ge=0.0)
    stg_blocks: list[int] | None = Field(default_factory=lambda: [28])
    guidance_rescale: float = Field(default=0.7, ge=0.0, le=1.0)
    video_modality_guidance_scale: float = Field(default=3.0, ge=1.0)
    audio_modality_guidance_scale: float = Field(default=3.0, ge=1.0)
    generate_audio: bool = True
    generate_video: bool = True
    skip_initial_validation: bool = False
    include_reference_in_output: bool = False

    @model_validator(mode="before")
    @classmethod
    def _migrate_deprecated_guidance_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        values = dict(data)
        _migrate_guidance(values)
        return values

    @field_validator("images")
    @classmethod
    def _check_images(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None:
            _check_legacy_paths(value, "image", info)
        return value

    @field_validator("reference_videos")
    @classmethod
    def _check_reference_videos(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None:
            _check_legacy_paths(value, "reference video", info)
        return value

    @model_validator(mode="after")
    def _convert_legacy_format(self) -> ValidationConfig:
        # Deprecated prompts (+ images / reference_videos) become samples only when samples is empty.
        if not self.prompts or self.samples:
            return self
        samples = []
        for index, prompt in enumerate(self.prompts):
            conditions: list[Any] = []
            if self.images and index < len(self.images):
                conditions.append(FirstFrameConditionConfig(image_or_video=self.images[index]))
            if self.reference_videos and index < len(self.reference_videos):
                conditions.append(ReferenceConditionConfig(
                    video=self.reference_videos[index],
                    downscale_factor=self.reference_downscale_factor,
                    include_in_output=self.include_reference_in_output,
                ))
            samples.append(ValidationSample(prompt=prompt, conditions=conditions))
        self.samples = samples
        return self

    @model_validator(mode="after")
    def _require_an_output_modality(self) -> ValidationConfig:
        if (self.prompts or self.samples) and not self.generate_video and not self.generate_audio:
            raise ValueError(
                "At least one of generate_video or generate_audio must be True when validation is configured."
            )
        return self
