"""Audio from the data: whether a run trains audio with its video, decided from the clips' sound.

The t2v, i2v, video-extend and video-suffix templates train the audio branch beside the video one,
and the trainer silently drops every sample without audio latents (``Skipped N invalid samples``).
So the choice is made before approval, from the probe's ``has_audio`` per clip and ``--audio``:

- ``auto``: every clip has sound -> audio and video (the template as shipped); no clip has sound ->
  video only, no question asked; some silent -> an approval blocker naming the silent clips and both
  ways out (``--audio off``: video on every clip; ``--audio on``: audio and video on the clips with
  sound, the silent ones left out of the dataset).
- ``on``: audio and video; silent clips are left out of the dataset the trainer sees.
- ``off``: video only on every clip.

Video only is the trainer's own video-only setup (its configuration reference): no audio modality
in the flexible strategy, no audio generated at validation, LoRA on the video attention modules.
Pure rules; the phases do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.config_patch import Patch
from ltx_pipeline.ltx.modes import Mode

__all__ = ["AUDIO_CHOICE_MODES", "VIDEO_ONLY_TARGETS", "AudioPlan", "audio_option_problem", "decide_audio",
           "preprocess_flags", "trained_mode", "video_only_patches"]

#: Modes whose template generates audio beside video: the only ones where dropping audio keeps the mode's meaning
#: (a2v is conditioned on audio, v2a generates only audio, av2av's reference audio would be orphaned: use v2v).
AUDIO_CHOICE_MODES = ("t2v", "i2v", "video-extend", "video-suffix")

#: The configuration reference's recommended LoRA targets for video-only training (video self- and cross-attention).
VIDEO_ONLY_TARGETS = ("attn1.to_k", "attn1.to_q", "attn1.to_v", "attn1.to_out.0",
                      "attn2.to_k", "attn2.to_q", "attn2.to_v", "attn2.to_out.0")


@dataclass(frozen=True)
class AudioPlan:
    """What the run trains, and on which clips.

    Attributes:
        requested: ``auto``, ``on`` or ``off`` as asked.
        trains: ``audio+video``, ``video`` (video only) or ``as-mode`` (a mode the choice does not apply to).
        reason: why, in one sentence (shown in plan.md and recorded with the config patches).
        silent: the clips (paths) without an audio stream.
        left_out: the clips left out of the dataset (``--audio on`` with silent clips).
        clips: how many clips the probe measured.
        blocker: the approval blocker (some clips silent, ``auto``), or None.
    """

    requested: str
    trains: str
    reason: str
    silent: tuple[str, ...] = field(default_factory=tuple)
    left_out: tuple[str, ...] = field(default_factory=tuple)
    clips: int = 0
    blocker: str | None = None

    @property
    def video_only(self) -> bool:
        return self.trains == "video"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["silent"], data["left_out"] = list(self.silent), list(self.left_out)
        return data

    def plan_lines(self, target: str) -> list[str]:
        """The plan.md section: what trains, why, which clips are silent or left out, and the patched keys."""
        # Until the user chooses, nothing is decided: never show the template's default as the choice.
        trains = "not decided yet" if self.blocker and self.trains != "as-mode" else _TRAINS_WORDS[self.trains]
        lines = ["## Audio", "",
                 f"- Trains: **{trains}** (`--audio {self.requested}`): {self.reason}"]
        if self.silent:
            lines.append(f"- Clips without sound ({len(self.silent)} of {self.clips}): "
                         + ", ".join(f"`{Path(c).name}`" for c in self.silent))
        if self.left_out:
            lines.append(f"- Left out of the dataset the trainer sees ({len(self.left_out)}): "
                         + ", ".join(f"`{Path(c).name}`" for c in self.left_out)
                         + f"; the other {self.clips - len(self.left_out)} clip(s) are the training set (less any "
                           "held out)")
        if self.video_only:
            lines.append("- Config patches for video only: `training_strategy.audio: null` (no audio modality), "
                         "`validation.generate_audio: false`" + ", `lora.target_modules`: the video attention "
                         "modules (" + ", ".join(VIDEO_ONLY_TARGETS) + "), as the trainer's configuration reference "
                         "recommends for video-only training")
        if self.blocker and self.trains == "as-mode":
            lines.append(f"- **This blocks approval.** {self.blocker.removeprefix('audio: ')}")
        elif self.blocker:
            lines += [f"- **This blocks approval.** Choose one: `ltx-pipeline run {target} --audio off` (video on all "
                      f"{self.clips} clips, no audio trained) or `ltx-pipeline run {target} --audio on` (video and "
                      f"audio on the {self.clips - len(self.silent)} clip(s) with sound; the silent ones named above "
                      "are left out), or set `audio:` in run.yaml and resume"]
        return [*lines, ""]


_TRAINS_WORDS = {"audio+video": "audio and video", "video": "video only", "as-mode": "as the mode defines"}


def audio_option_problem(mode: str, audio: str) -> str | None:
    """Why ``--audio`` cannot apply to ``mode`` (None when it can, or when it is ``auto``).

    The audio+video modes take both values. Modes that read the clips' sound whatever is asked (a2v, v2a,
    av2av) take ``on`` only: it leaves the silent clips out. Other modes read no sound from the clips.
    """
    from ltx_pipeline.ltx.modes import MODES

    if audio == "auto" or mode in AUDIO_CHOICE_MODES or mode not in MODES:
        return None
    if audio == "on" and _reads_clip_sound(MODES[mode]):
        return None
    if _reads_clip_sound(MODES[mode]):
        return (f"--audio off cannot apply to mode {mode}: it trains on the clips' sound (use --audio on to leave "
                "the silent clips out; for video-only IC-LoRA use --mode v2v)")
    return (f"--audio {audio} applies only to modes that train audio beside video ({', '.join(AUDIO_CHOICE_MODES)}); "
            f"mode {mode} reads no sound from its clips")


def _reads_clip_sound(mode: Mode) -> bool:
    """The mode's training reads audio latents made from its video clips' own sound."""
    return mode.audio_run and mode.video_media


def decide_audio(mode: Mode, requested: str, facts: Mapping[str, Mapping[str, Any]]) -> AudioPlan:
    """The audio choice for a run from its mode, ``--audio`` and the probe's facts per clip.

    Args:
        mode: the training mode.
        requested: ``auto``, ``on`` or ``off``.
        facts: clip path -> the probe's facts (``kind``, ``has_audio``); images and unknown kinds are ignored.
    """
    videos = {clip: f for clip, f in facts.items() if f.get("kind") == "video"}
    silent = tuple(sorted(clip for clip, f in videos.items() if not f.get("has_audio")))
    total = len(videos)
    if mode.name not in AUDIO_CHOICE_MODES:
        return _fixed_modalities(mode, requested, silent, total)
    if requested == "off":
        return AudioPlan(requested, "video", f"--audio off: video only, on all {total} clip(s)", silent, clips=total)
    if requested == "on":
        if silent and len(silent) == total:
            reason = ("--audio on, but no clip has sound: nothing would train (the trainer drops every sample without "
                      "audio latents); use --audio off or auto")
            return AudioPlan(requested, "audio+video", reason, silent, silent, total,
                             blocker=f"audio: --audio on with no clip that has sound (all {total} silent); "
                                     "use --audio off (video only) or auto")
        reason = ("--audio on: audio and video" + (f"; the {len(silent)} silent clip(s) are left out of the dataset"
                                                   if silent else " (every clip has sound)"))
        return AudioPlan(requested, "audio+video", reason, silent, silent, total)
    if not videos or not silent:
        return AudioPlan(requested, "audio+video", f"every clip ({total}) has sound: audio and video, as the "
                         "template trains them" if videos else "no clip facts to decide from: the template as shipped",
                         clips=total)
    if len(silent) == total:
        return AudioPlan(requested, "video", f"no clip has sound ({total} silent): video only, on every clip (the "
                         "trainer would drop every sample of an audio run)", silent, clips=total)
    blocker = (f"audio: {len(silent)} of {total} clip(s) have no sound ({_some(silent)}); choose --audio off (video "
               f"on all {total} clips) or --audio on (video and audio on the {total - len(silent)} clip(s) with sound, "
               "the silent ones left out)")
    return AudioPlan(requested, "audio+video", f"{len(silent)} of {total} clip(s) have no sound: your choice is "
                     "needed", silent, clips=total, blocker=blocker)


def _fixed_modalities(mode: Mode, requested: str, silent: tuple[str, ...], total: int) -> AudioPlan:
    """A mode whose modalities are fixed: one that reads the clips' sound names its silent clips before approval
    (the trainer would drop them), and ``--audio on`` leaves them out."""
    reason = f"mode {mode.name} trains {_modalities(mode)} as its template says"
    if not _reads_clip_sound(mode) or not silent:
        return AudioPlan(requested, "as-mode", reason, clips=total)
    if requested == "on" and len(silent) < total:
        return AudioPlan(requested, "as-mode", f"{reason}; --audio on: the {len(silent)} silent clip(s) are left "
                         "out of the dataset", silent, silent, total)
    everyone = len(silent) == total
    blocker = (f"audio: mode {mode.name} trains on the clips' sound, and {len(silent)} of {total} clip(s) have none "
               f"({_some(silent)}); " + ("add a sound track to them, or choose a mode that reads no sound (v2v)"
                                          if everyone else "pass --audio on to leave them out, or add a sound track"))
    return AudioPlan(requested, "as-mode", f"{reason}; {len(silent)} of {total} clip(s) have no sound", silent,
                     clips=total, blocker=blocker)


def trained_mode(mode: Mode, audio: AudioPlan | Mapping[str, Any] | None) -> Mode:
    """The mode as trained: a video-only run reads and preprocesses no audio latents (its audio gate is off).

    ``audio``: the plan's choice (``PlanOutputs.audio``), or its stored dict; None for a plan made before it.
    """
    trains = audio.trains if isinstance(audio, AudioPlan) else (audio or {}).get("trains")
    if trains != "video":
        return mode
    return replace(mode, precomputed_dirs=tuple(d for d in mode.precomputed_dirs if "audio" not in d),
                   generates_audio=False)


def preprocess_flags(mode: Mode) -> list[str]:
    """The flags ``process_dataset.py`` needs for ``mode`` as trained: ``--skip-audio`` when training reads no
    audio latents (a video-only run), so the sound of clips that have it is not encoded for nothing."""
    return [] if mode.audio_run else ["--skip-audio"]


def video_only_patches(training_mode: str) -> list[Patch]:
    """The patches that make a mode's audio+video template train video only (the trainer's own setup)."""
    patches = [
        Patch("training_strategy.audio", None, "video only (--audio): no audio modality in the flexible strategy, so "
              "no sample needs audio latents"),
        Patch("validation.generate_audio", False, "video only (--audio): validation generates no audio"),
    ]
    if training_mode == "lora":
        patches.append(Patch("lora.target_modules", list(VIDEO_ONLY_TARGETS),
                             "video only (--audio): the video attention modules, the configuration reference's "
                             "targets for video-only training (the template's short names also match audio modules)"))
    return patches


def _modalities(mode: Mode) -> str:
    return " and ".join(n for n, on in (("video", mode.generates_video), ("audio", mode.generates_audio)) if on)


def _some(clips: tuple[str, ...], limit: int = 5) -> str:
    names = [Path(c).name for c in clips]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def rows_with_sound(rows: list[dict[str, Any]], base: Path, facts: Mapping[str, Mapping[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[str]]:
    """The metadata rows whose video has sound, and the media paths (as written) of the rows left out.

    Args:
        rows: the metadata rows as read.
        base: the folder media paths are relative to (the metadata file's).
        facts: clip path -> the probe's facts; a clip is silent when its facts say ``has_audio`` false.
    """
    from ltx_pipeline.ltx.modes import COLUMN_ALIASES

    silent = {Path(clip).resolve() for clip, f in facts.items() if f.get("kind") == "video" and not f.get("has_audio")}
    kept: list[dict[str, Any]] = []
    left_out: list[str] = []
    for row in rows:
        media = next((str(row[c]) for c in COLUMN_ALIASES["video"] if isinstance(row.get(c), str) and row[c]), None)
        if media is not None and (base / media).resolve() in silent:
            left_out.append(media)
        else:
            kept.append(row)
    return kept, left_out
