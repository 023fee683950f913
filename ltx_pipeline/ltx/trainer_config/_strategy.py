"""Mirror of the trainer's ``training_strategy`` section: the three strategies and their conditions.

Owns the strategy union (tagged ``text_to_video`` / ``video_to_video`` / ``flexible``, chosen by a
callable discriminator that falls back to ``text_to_video`` when ``name`` is missing, as the
trainer's does), the flexible strategy's modality and training-condition classes (discriminated on
``type``), their validators, and ``get_data_sources()``: the single source of truth for which
directories must exist under ``preprocessed_data_root`` (facts §1.5). Every class forbids unknown
keys, so a misspelled key fails at its dotted location exactly as in the trainer.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from ltx_pipeline.ltx.trainer_config._sections import ConfigBaseModel

__all__ = [
    "ConditionConfig",
    "FirstFrameConditionConfig",
    "FlexibleStrategyConfig",
    "MaskConditionConfig",
    "ModalityConfig",
    "PrefixConditionConfig",
    "ReferenceConditionConfig",
    "SpatialCropConditionConfig",
    "SuffixConditionConfig",
    "TextToVideoConfig",
    "TrainingStrategyConfig",
    "VideoToVideoConfig",
]


# --- flexible training conditions (different classes from the validation conditions) -------------


class _IntrinsicCondition(ConfigBaseModel):
    """Intrinsic conditions: the covered tokens are clean and excluded from the loss."""

    probability: float = Field(default=1.0, ge=0.0, le=1.0)


class FirstFrameConditionConfig(_IntrinsicCondition):
    """Latent frame 0 is clean; video only."""

    type: Literal["first_frame"] = "first_frame"


class PrefixConditionConfig(_IntrinsicCondition):
    """The first ``temporal_boundary`` latent frames (video) or audio latent steps are clean."""

    type: Literal["prefix"] = "prefix"
    temporal_boundary: int = Field(..., ge=1)


class SuffixConditionConfig(_IntrinsicCondition):
    """The last ``temporal_boundary`` latent frames (video) or audio latent steps are clean."""

    type: Literal["suffix"] = "suffix"
    temporal_boundary: int = Field(..., ge=1)


class SpatialCropConditionConfig(_IntrinsicCondition):
    """A pixel rectangle ``(y1, x1, y2, x2)`` is clean; video only."""

    type: Literal["spatial_crop"] = "spatial_crop"
    spatial_region: tuple[int, int, int, int] = Field(...)


class MaskConditionConfig(_IntrinsicCondition):
    """Per-sample masks read from ``mask_dir`` under the data root."""

    type: Literal["mask"] = "mask"
    mask_dir: str = Field(...)


class ReferenceConditionConfig(ConfigBaseModel):
    """IC-LoRA reference latents read from ``latents_dir``, prepended clean and excluded from the loss."""

    type: Literal["reference"] = "reference"
    latents_dir: str = Field(...)
    probability: float = Field(default=1.0, ge=0.0, le=1.0)


ConditionConfig = Annotated[
    FirstFrameConditionConfig
    | PrefixConditionConfig
    | SuffixConditionConfig
    | SpatialCropConditionConfig
    | MaskConditionConfig
    | ReferenceConditionConfig,
    Field(discriminator="type"),
]

# Audio has no frame 0 image and no spatial grid, so these two conditions are refused on audio.
_VIDEO_ONLY_CONDITIONS = (FirstFrameConditionConfig, SpatialCropConditionConfig)


class ModalityConfig(ConfigBaseModel):
    """One modality of the flexible strategy: generated (denoised, in the loss) or frozen conditioning."""

    is_generated: bool = Field(...)
    latents_dir: str = Field(...)
    conditions: list[ConditionConfig] = Field(default_factory=list)


# --- strategies ------------------------------------------------------------------------------------


class _StrategyBase(ConfigBaseModel):
    """Common base; ``name`` is overridden by each strategy with its own tag as default."""

    name: Literal["text_to_video", "video_to_video", "flexible"]

    @abstractmethod
    def get_data_sources(self) -> dict[str, str]:
        """Directory name under ``preprocessed_data_root`` -> dataset output key."""


class TextToVideoConfig(_StrategyBase):
    """Deprecated legacy text-to-video strategy; the default when ``training_strategy`` is omitted."""

    name: Literal["text_to_video"] = "text_to_video"
    first_frame_conditioning_p: float = Field(default=0.1, ge=0.0, le=1.0)
    with_audio: bool = False
    audio_latents_dir: str = "audio_latents"

    def get_data_sources(self) -> dict[str, str]:
        """``latents`` and ``conditions``, plus the audio latents dir when ``with_audio``."""
        sources = {"latents": "latents", "conditions": "conditions"}
        if self.with_audio:
            sources[self.audio_latents_dir] = "audio_latents"
        return sources


class VideoToVideoConfig(_StrategyBase):
    """Deprecated legacy IC-LoRA strategy."""

    name: Literal["video_to_video"] = "video_to_video"
    first_frame_conditioning_p: float = Field(default=0.1, ge=0.0, le=1.0)
    reference_latents_dir: str = "reference_latents"

    def get_data_sources(self) -> dict[str, str]:
        """``latents``, ``conditions`` and the reference latents dir."""
        return {"latents": "latents", "conditions": "conditions", self.reference_latents_dir: "ref_latents"}


class FlexibleStrategyConfig(_StrategyBase):
    """The recommended strategy: each modality is configured, generated or frozen, with conditions."""

    name: Literal["flexible"] = "flexible"
    video: ModalityConfig | None = None
    audio: ModalityConfig | None = None

    @model_validator(mode="after")
    def _require_generated_modality(self) -> FlexibleStrategyConfig:
        video_generated = self.video is not None and self.video.is_generated
        audio_generated = self.audio is not None and self.audio.is_generated
        if not (video_generated or audio_generated):
            raise ValueError("At least one modality must have is_generated=true")
        return self

    @model_validator(mode="after")
    def _refuse_video_only_conditions_on_audio(self) -> FlexibleStrategyConfig:
        for condition in self.audio.conditions if self.audio is not None else []:
            if isinstance(condition, _VIDEO_ONLY_CONDITIONS):
                raise ValueError(
                    f"Intrinsic condition '{condition.type}' is not supported for audio. "
                    "Audio supports: prefix, suffix, mask."
                )
        return self

    def get_data_sources(self) -> dict[str, str]:
        """``conditions``, each modality's latents dir, and every reference/mask directory."""
        sources = {"conditions": "conditions"}
        if self.video is not None:
            sources[self.video.latents_dir] = "video_latents"
        if self.audio is not None:
            sources[self.audio.latents_dir] = "audio_latents"
        for modality in (self.video, self.audio):
            for condition in modality.conditions if modality is not None else []:
                if isinstance(condition, ReferenceConditionConfig):
                    sources[condition.latents_dir] = condition.latents_dir
                elif isinstance(condition, MaskConditionConfig):
                    sources[condition.mask_dir] = condition.mask_dir
        return sources


def _get_strategy_discriminator(value: Any) -> object:
    """The union tag: ``name`` of a mapping (``text_to_video`` when absent), or of a built strategy.

    Named like the trainer's function because pydantic quotes the name in ``union_tag_invalid``
    messages. Unlike the trainer (which crashes with AttributeError), a value that is neither a
    mapping nor a strategy yields None, which pydantic reports as ``union_tag_not_found``. The tag is
    whatever the mapping holds (normally a str), so a malformed one reaches pydantic as it is.
    """
    if isinstance(value, dict):
        return value.get("name", "text_to_video")
    return getattr(value, "name", None)


TrainingStrategyConfig = Annotated[
    Annotated[TextToVideoConfig, Tag("text_to_video")]
    | Annotated[VideoToVideoConfig, Tag("video_to_video")]
    | Annotated[FlexibleStrategyConfig, Tag("flexible")],
    Discriminator(_get_strategy_discriminator),
]
