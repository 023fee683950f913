"""Where each validation sample's conditioning media comes from: the user's own rows, chosen before approval.

13 of the trainer's 15 templates ship validation samples whose conditions name placeholder media
(``/path/to/conditioning_image_1.png``); copied as they are, the trainer stops while pre-encoding them,
after preprocessing and the model load were paid for. So every condition of the template's samples is
filled from a dataset row, in the template's shape (its settings kept, its geometry fitted to the
validation size), and the choice is made by the plan, where the user reads it:

- rows: held-out rows first (they are what the LoRA has not seen), then training rows, in dataset order;
  a row qualifies only when it can give every condition the mode's samples need (a clip with sound for
  an audio condition taken from a video, the row's own mask or reference column);
- media: a column as it is, or derived into the run (never beside the user's files): the first frame of
  a clip as a PNG (``first_frame``), and every audio medium as a stereo WAV (the trainer's validation feeds
  the file as it loads it to an audio VAE that takes 2 channels; a mono file crashes it);
- prompts: the same rows' captions with the trigger in front, as preprocessing puts it;
- geometry: the template's prefix/suffix lengths and crop regions fitted to the run's buckets
  (``ltx.condition_geometry``).

Where no row can give what a mode's validation needs, the plan says so as an approval blocker with the
two ways out (validation without that condition, or none); nothing is dropped silently.
Pure: rows in, a choice out; the phases read and write.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["CHOICES", "Candidate", "ConditionSource", "SampleSource", "ValidationSources", "choose_sources",
           "condition_needs", "plan_lines", "prompt_for"]

Derive = Literal["as_is", "first_frame_png", "sound_wav"]
#: ``--validation-media``: ``auto`` fills every condition from the data (else a blocker); ``without`` keeps
#: the samples' prompts and drops only the conditions the data cannot give; ``none`` turns validation off.
CHOICES = ("auto", "without", "none")


@dataclass(frozen=True)
class Need:
    """What one condition field needs from a row: a column, or the row's clip (as is or derived)."""

    columns: tuple[str, ...]  # the first column set in the row is used
    derive: Derive = "as_is"
    needs_sound: bool = False  # a sound track read from a video clip

    def words(self) -> str:
        column = "/".join(self.columns)
        if self.derive == "first_frame_png":
            return f"the first frame of the row's {column} clip, as a PNG"
        if self.derive == "sound_wav":
            return f"the sound of the row's {column} file, as a stereo WAV"
        return f"the row's {column} file"


_CLIP = ("video", "media_path")
_AUDIO_FILE = ("audio",)


def condition_needs(condition: dict[str, Any], *, video_media: bool) -> dict[str, Need]:
    """field -> what it needs, for one template condition (its media fields only).

    Args:
        condition: a template condition (``type`` and its fields).
        video_media: the mode's media column is ``video`` (else ``audio``: the audio-only modes).
    """
    kind = str(condition.get("type"))
    needs: dict[str, Need] = {}
    # Every audio medium is written as a stereo WAV: the trainer's validation encodes the file as it loads it,
    # and its audio VAE takes 2 channels (a mono file fails in conv2d; preprocessing converts, validation does not).
    sound = Need(_CLIP, "sound_wav", needs_sound=True) if video_media else Need(_AUDIO_FILE, "sound_wav")
    if kind == "first_frame":
        needs["image_or_video"] = Need(_CLIP, "first_frame_png")
    elif kind == "reference":
        if "video" in condition:
            needs["video"] = Need(("reference_video", "ref_media_path"))
        if "audio" in condition:
            needs["audio"] = Need(("reference_audio",), "sound_wav")
    elif kind == "audio_to_video":
        needs["audio"] = sound
    else:  # prefix, suffix, mask, spatial_crop, video_to_audio: the row's own clip (or audio file)
        if "video" in condition:
            needs["video"] = Need(_CLIP)
        if "audio" in condition:
            needs["audio"] = sound
        if kind == "mask":
            needs["mask"] = Need(("video_mask",) if "video" in condition else ("audio_mask",))
    return needs


@dataclass(frozen=True)
class Candidate:
    """A dataset row as the plan knows it.

    Attributes:
        source: the row's media file (absolute), its name in plan.md.
        row: its index in the metadata file (0-based), None for a clip of a folder.
        held_out: whether it is a held-out row.
        columns: column -> absolute path, for the media columns the row sets.
        has_sound: whether its clip has a sound track (None: not known).
        caption: its caption, None when it has none yet (a folder's clips are captioned by prepare).
    """

    source: str
    row: int | None
    held_out: bool
    columns: dict[str, str]
    has_sound: bool | None = None
    caption: str | None = None


@dataclass(frozen=True)
class ConditionSource:
    """One condition field filled from a row."""

    sample: int  # the template sample (0-based)
    condition: int  # the condition within it (0-based)
    type: str
    field: str
    column: str
    derive: Derive
    file: str  # the row's file the medium comes from (absolute)


@dataclass(frozen=True)
class SampleSource:
    """One validation sample: the row its prompt and media come from, and why that row."""

    sample: int
    source: str
    row: int | None
    held_out: bool
    why: str
    conditions: tuple[ConditionSource, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"sample": self.sample, "source": self.source, "row": self.row, "held_out": self.held_out,
                "why": self.why, "conditions": [vars(c) for c in self.conditions]}


@dataclass(frozen=True)
class ValidationSources:
    """The plan's choice for the validation samples.

    Attributes:
        choice: ``--validation-media`` as asked (``auto``, ``without``, ``none``).
        needs: what the mode's validation needs from a row, in words (empty: no conditions).
        samples: one per validation sample kept.
        dropped: the condition types left out (``without``), none otherwise.
        note: one sentence for plan.md when something is not as the template has it.
        blocker: the approval blocker when no row can give what the samples need (``auto``), else None.
    """

    choice: str
    needs: tuple[str, ...] = ()
    samples: tuple[SampleSource, ...] = field(default_factory=tuple)
    dropped: tuple[str, ...] = ()
    note: str | None = None
    blocker: str | None = None

    @property
    def validation_off(self) -> bool:
        return self.choice == "none"

    def to_dict(self) -> dict[str, Any]:
        return {"choice": self.choice, "needs": list(self.needs), "samples": [s.to_dict() for s in self.samples],
                "dropped": list(self.dropped), "note": self.note, "blocker": self.blocker}


def _qualifies(candidate: Candidate, needs: Sequence[Need]) -> str | None:
    """None when the row gives every need, else what it lacks."""
    for need in needs:
        column = next((c for c in need.columns if candidate.columns.get(c)), None)
        if column is None:
            return f"no {'/'.join(need.columns)} column"
        if need.needs_sound and candidate.has_sound is False:
            return "its clip has no sound"
    return None


def choose_sources(shapes: Sequence[Sequence[dict[str, Any]]], candidates: Sequence[Candidate], *,
                   video_media: bool, choice: str = "auto", prefer: Sequence[str] = ()) -> ValidationSources:
    """Choose the row of every validation sample whose conditions name media.

    Args:
        shapes: the template's validation samples' conditions, one list per sample (empty lists: no media).
        candidates: the dataset's rows, held-out ones anywhere in the list (they are taken first).
        video_media: the mode's media column is ``video``.
        choice: ``auto``, ``without`` or ``none`` (see ``CHOICES``).
        prefer: sources (real paths) to take first, in this order: the plan's choice, when the config is
            written from the prepared dataset.

    Returns:
        The samples' sources in template order; a blocker (``auto``) when no row qualifies.
    """
    needs_by_sample = [[(ci, f, need) for ci, cond in enumerate(conds)
                        for f, need in condition_needs(cond, video_media=video_media).items()] for conds in shapes]
    words = tuple(dict.fromkeys(f"{shapes[si][ci].get('type')}.{f}: {need.words()}"
                                for si, needs in enumerate(needs_by_sample) for ci, f, need in needs))
    if choice == "none":
        return ValidationSources(choice, words, note="--validation-media none: no validation samples during "
                                                     "training (validation.interval off)")
    if not any(needs_by_sample):
        return ValidationSources(choice, words)
    rank = {source: index for index, source in enumerate(prefer)}
    # Stable: the preferred rows in their order, then held-out rows, then dataset order.
    ordered = sorted(candidates, key=lambda c: (rank.get(os.path.realpath(c.source), len(rank)), not c.held_out))
    all_needs = [need for needs in needs_by_sample for _, _, need in needs]
    fitting = [c for c in ordered if _qualifies(c, all_needs) is None]
    if not fitting:
        reasons = sorted({r for c in ordered if (r := _qualifies(c, all_needs))}) or ["the dataset has no rows"]
        types = tuple(dict.fromkeys(str(shapes[si][ci].get("type")) for si, needs in enumerate(needs_by_sample)
                                    for ci, _, _ in needs))
        if choice == "without":
            return ValidationSources(choice, words, dropped=types,
                                     note=f"--validation-media without: the samples run without their "
                                          f"{', '.join(types)} condition(s); no row can give them "
                                          f"({'; '.join(reasons)})")
        blocker = (f"validation: no row can give the {', '.join(types)} condition(s) of the mode's validation "
                   f"samples ({'; '.join(reasons)}). Add such rows, or choose: `--validation-media without` "
                   "(validate on the prompts alone) or `--validation-media none` (no validation during training)")
        return ValidationSources(choice, words, blocker=blocker)
    samples = []
    for index, needs in enumerate(needs_by_sample):
        candidate = fitting[index % len(fitting)]
        why = ("the plan's choice" if os.path.realpath(candidate.source) in rank
               else "a held-out row: the LoRA never trains on it" if candidate.held_out
               else "a training row, in dataset order" + ("" if index < len(fitting) else
                                                          " (fewer qualifying rows than samples: reused)"))
        conditions = []
        for ci, name, need in needs:
            column = next(c for c in need.columns if candidate.columns.get(c))
            conditions.append(ConditionSource(index, ci, str(shapes[index][ci].get("type")), name, column,
                                              need.derive, candidate.columns[column]))
        samples.append(SampleSource(index, candidate.source, candidate.row, candidate.held_out, why,
                                    tuple(conditions)))
    return ValidationSources(choice, words, tuple(samples))


def prompt_for(caption: str, trigger: str | None) -> str:
    """The caption as the model trained on it: preprocessing's ``--lora-trigger`` puts ``"{trigger} "`` in front."""
    return f"{trigger.strip()} {caption.strip()}" if trigger else caption.strip()



def plan_lines(sources: ValidationSources, target: str, trigger: str | None = None) -> list[str]:
    """plan.md's "Validation samples" section: what the mode's validation needs, and which row gives it."""
    lines = ["## Validation samples", ""]
    if sources.validation_off:
        return [*lines, f"- {sources.note}", ""]
    if not sources.needs:
        return []  # the template's samples name no media: nothing to choose
    lines.append("- The mode's samples need: " + "; ".join(sources.needs))
    for sample in sources.samples:
        row = f"row {sample.row + 1}" if sample.row is not None else "clip"
        where = "the holdout file's " if sample.held_out else ""
        caption = "its caption" if sample.row is not None else "its caption (written by prepare)"
        front = f" with `{trigger.strip()}` in front" if trigger else ""
        media = "; ".join(f"{c.type}.{c.field} from `{Path(c.file).name}` ({_DERIVED[c.derive]})"
                          for c in sample.conditions)
        lines.append(f"- Sample {sample.sample + 1}: {where}{row} `{Path(sample.source).name}` ({sample.why}): "
                     f"prompt = {caption}{front}; {media}")
    if sources.samples:
        lines.append("- Derived media are written under the run's `validation/` folder, never beside your files.")
    if sources.note:
        lines.append(f"- {sources.note}")
    if sources.blocker:
        lines.append(f"- **This blocks approval.** {sources.blocker.removeprefix('validation: ')} "
                     f"(`ltx-pipeline run {target} --validation-media ...`, or `validation_media:` in run.yaml "
                     "and resume)")
    return [*lines, ""]


_DERIVED = {"as_is": "as it is", "first_frame_png": "its first frame, written as a PNG",
            "sound_wav": "its sound, written as a stereo WAV"}
