"""The training modes the official skill offers, and what each needs from the trainer.

Each mode maps to one of the trainer's shipped example configs (facts §2.2), the metadata
columns preprocessing needs, the ``.precomputed/`` subfolders training reads, and whether the
run generates video and/or audio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx_pipeline.errors import BadRequest

__all__ = ["LOW_VRAM_T2V_CONFIG", "MODES", "Mode", "generated_media", "get_mode"]

LOW_VRAM_T2V_CONFIG = "t2v_lora_low_vram.yaml"


@dataclass(frozen=True)
class Mode:
    """One training mode: its config template, data needs and generated modalities."""

    name: str
    title: str
    config: str
    columns: tuple[str, ...]
    precomputed_dirs: tuple[str, ...]
    generates_video: bool
    generates_audio: bool
    learning_rate: float
    steps: int
    video_media: bool  # the media column is `video` (else `audio`)

    @property
    def generates(self) -> str:
        """What a run of this mode generates, in words: ``video + audio``, ``video`` or ``audio``."""
        return " + ".join(name for name, on in (("video", self.generates_video), ("audio", self.generates_audio)) if on)

    @property
    def audio_run(self) -> bool:
        """Whether training reads audio latents (generated or as a frozen condition)."""
        return "audio_latents" in self.precomputed_dirs


def _mode(name: str, title: str, config: str, columns: tuple[str, ...], dirs: tuple[str, ...],
          video: bool, audio: bool, lr: float = 1e-4, steps: int = 2000) -> Mode:
    return Mode(name, title, config, ("caption", *columns), ("conditions", *dirs), video, audio, lr, steps,
                video_media="video" in columns)


_AV = ("latents", "audio_latents")
MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        _mode("t2v", "text-to-video", "t2v_lora.yaml", ("video",), _AV, True, True),
        _mode("i2v", "image-to-video (first-frame conditioning)", "i2v_lora.yaml", ("video",), _AV, True, True),
        _mode("video-extend", "extend video forward (prefix)", "video_extend_lora.yaml", ("video",), _AV,
              True, True),
        _mode("video-suffix", "extend video backward (suffix)", "video_suffix_lora.yaml", ("video",), _AV,
              True, True),
        _mode("a2v", "audio-to-video", "a2v_lora.yaml", ("video",), _AV, True, False),
        _mode("v2a", "video-to-audio (Foley)", "v2a_lora.yaml", ("video",), _AV, False, True),
        _mode("v2v", "video-to-video IC-LoRA", "v2v_ic_lora.yaml", ("video", "reference_video"),
              ("latents", "reference_latents"), True, False, lr=2e-4, steps=3000),
        _mode("video-inpaint", "video inpainting", "video_inpainting_lora.yaml", ("video", "video_mask"),
              ("latents", "video_masks"), True, False),
        _mode("video-outpaint", "video outpainting", "video_outpainting_lora.yaml", ("video",), ("latents",),
              True, False),
        _mode("t2a", "text-to-audio", "t2a_lora.yaml", ("audio",), ("audio_latents",), False, True,
              lr=2e-4, steps=3000),
        _mode("audio-extend", "extend audio forward (prefix)", "audio_extend_lora.yaml", ("audio",),
              ("audio_latents",), False, True, lr=2e-4, steps=3000),
        _mode("audio-suffix", "extend audio backward (suffix)", "audio_suffix_lora.yaml", ("audio",),
              ("audio_latents",), False, True, lr=2e-4, steps=3000),
        _mode("audio-inpaint", "audio inpainting", "audio_inpainting_lora.yaml", ("audio", "audio_mask"),
              ("audio_latents", "audio_masks"), False, True, lr=2e-4, steps=3000),
        _mode("a2a", "audio-to-audio IC-LoRA", "a2a_ic_lora.yaml", ("audio", "reference_audio"),
              ("audio_latents", "reference_audio_latents"), False, True, lr=2e-4, steps=3000),
        _mode("av2av", "audio+video IC-LoRA", "av2av_ic_lora.yaml", ("video", "reference_video", "reference_audio"),
              ("latents", "audio_latents", "reference_latents", "reference_audio_latents"), True, True,
              lr=2e-4, steps=3000),
    )
}

# Legacy metadata column names the trainer still accepts (facts §6.1).
COLUMN_ALIASES = {"video": ("video", "media_path"), "reference_video": ("reference_video", "ref_media_path")}


# The words for a run whose audio choice still waits for the user (``AudioPlan.blocker``).
UNDECIDED = "not decided yet (silent clips: choose --audio on or off)"


def generated_media(mode: Mode, audio: Mapping[str, Any] | None) -> str:
    """What a run of ``mode`` generates as planned, in the words plan.md, run-summary, status and the dashboard share.

    ``audio``: the plan's stored audio choice (``AudioPlan.to_dict()``), None for a plan without one. A
    video-only choice (``trains: video``) drops the audio a template generates (``audio_choice.trained_mode``);
    while its blocker waits for the user, nothing is decided. Pure and standard-library only: ``status`` calls it.
    """
    audio = audio or {}
    if audio.get("blocker") and audio.get("trains") != "as-mode":
        return UNDECIDED
    if audio.get("trains") == "video":
        return "video"
    return mode.generates


def get_mode(name: str) -> Mode:
    """Look up a mode by name.

    Raises:
        BadRequest: unknown mode, listing the known ones.
    """
    try:
        return MODES[name]
    except KeyError:
        raise BadRequest(f"Unknown mode {name!r}", where="--mode",
                         fix="choose one of " + ", ".join(MODES)) from None
