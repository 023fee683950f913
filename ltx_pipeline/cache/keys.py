"""The latent cache's keys: what one preprocessed sample of one modality was made from, as named parts.

Owns the content address of a cache entry. A key is a digest (``sha256:`` over the canonical JSON of its
version, modality and the *values* of its parts) with the named parts kept beside it, so a miss can be
explained by comparing parts (``cache.misses``). Each part also has a *label* for people (a file name, a
model's name and digest prefix) that is not digested: the same model at another path, or the same clip
under another name, gives the same key.

What goes in (mirroring the trainer's ``process_videos.py`` / ``process_captions.py``):

- video and reference latents: the media file's content digest, the bucket the clip lands in, the VAE
  weights' content identity, the trainer code's identity, and the flags that change those bytes
  (frame selection, reshape mode, VAE tiling; for references also the spatial and temporal scale factors);
- audio latents: the file's content digest, the bucket (its frames set the audio's duration), the audio
  VAE's identity and the trainer's (``--with-audio`` decides whether an audio entry is wanted at all);
- text conditions: the caption exactly as the encoder sees it (``caption_as_seen``: LLM prefixes removed,
  trigger prepended), the text encoder's identity, the checkpoint's (its embeddings processor holds the
  text projections), 8-bit loading and the trainer's identity.

Pure: nothing here reads a file or a clock. File identities come from ``cache.digests``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ltx_pipeline.ltx.data_identity import model_label

__all__ = ["KEY_VERSION", "LLM_START_PHRASES", "SUBFOLDERS", "CacheKey", "Identity", "LatentFlags", "Modality",
           "Part", "caption_as_seen", "condition_key", "latent_key"]

KEY_VERSION = 1


class Modality(StrEnum):
    """What an entry holds; each has its subfolder of ``.precomputed`` (``SUBFOLDERS``)."""

    VIDEO = "video"
    AUDIO = "audio"
    REFERENCE = "reference"
    CONDITION = "condition"


SUBFOLDERS: Mapping[Modality, str] = {Modality.VIDEO: "latents", Modality.AUDIO: "audio_latents",
                                      Modality.REFERENCE: "reference_latents", Modality.CONDITION: "conditions"}

# The trainer's own list (scripts/process_captions.py, COMMON_LLM_START_PHRASES), in its order: the first
# phrase a caption starts with is removed, once.
_BEGINNINGS = ("This video", "The video", "This clip", "The clip", "The animation", "This image", "The image",
               "This picture", "The picture")
_CONTINUATIONS = ("shows", "depicts", "features", "captures", "highlights", "introduces", "presents")
LLM_START_PHRASES: tuple[str, ...] = ("In the video,", "In this video,", "In this video clip,", "In the clip,",
                                      "Caption:", *(f"{b} {c}" for b in _BEGINNINGS for c in _CONTINUATIONS))


def caption_as_seen(caption: str, *, trigger: str | None, remove_llm_prefixes: bool) -> str:
    """The prompt the text encoder gets for ``caption``, as ``CaptionsDataset`` builds it.

    With ``remove_llm_prefixes`` the caption is stripped and its first matching LLM phrase removed (then
    stripped again); without, it is used as written (not even stripped). A trigger (any non-empty text)
    is stripped and prepended with one space.
    """
    text = caption
    if remove_llm_prefixes:
        text = text.strip()
        for phrase in LLM_START_PHRASES:
            if text.startswith(phrase):
                text = text.removeprefix(phrase).strip()
                break
    return (f"{trigger.strip()} " if trigger else "") + text


@dataclass(frozen=True)
class Part:
    """One named part of a key: ``value`` is digested, ``label`` is what people read."""

    value: str
    label: str


@dataclass(frozen=True)
class Identity:
    """A model's or a program's content identity (``value``) and its name for people (``label``)."""

    value: str
    label: str

    @classmethod
    def of_model(cls, identity: Mapping[str, Any]) -> Identity:
        """From ``ltx.data_identity.model_identity``'s record: its content digest, labelled ``name (1a2b3c4d)``."""
        return cls(str(identity.get("content") or "missing"), model_label(identity))


@dataclass(frozen=True)
class LatentFlags:
    """The preprocessing flags that change latents' bytes (the trainer's defaults by default).

    ``frame_selection`` names how frames are taken from a clip (the trainer's: the bucket's first frames);
    ``reference_downscale`` and ``reference_temporal_scale`` apply to reference latents only.
    """

    frame_selection: str = "first"
    reshape_mode: str = "center"
    vae_tiling: bool = False
    reference_downscale: int = 1
    reference_temporal_scale: int = 1

    def parts(self, modality: Modality) -> dict[str, Part]:
        """The flags that change this modality's bytes, as parts named ``flag:<name>``."""
        names = {Modality.VIDEO: ("frame_selection", "reshape_mode", "vae_tiling"),
                 Modality.AUDIO: ("frame_selection",),  # the clip's frames decide the audio's span
                 Modality.REFERENCE: ("frame_selection", "reshape_mode", "vae_tiling", "reference_downscale",
                                      "reference_temporal_scale")}.get(modality, ())
        return {f"flag:{name}": _flag(name, getattr(self, name)) for name in names}


def _flag(name: str, value: object) -> Part:
    text = json.dumps(value)
    return Part(text, f"{name}={value}")


@dataclass(frozen=True)
class CacheKey:
    """A content address: modality and named parts; ``subject`` (the row's media name) only guides explanations."""

    modality: Modality
    parts: Mapping[str, Part]
    subject: str = ""
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        values = {name: part.value for name, part in self.parts.items()}
        payload = json.dumps({"version": KEY_VERSION, "modality": self.modality.value, "parts": values},
                             sort_keys=True, separators=(",", ":")).encode("utf-8")
        object.__setattr__(self, "digest", "sha256:" + hashlib.sha256(payload).hexdigest())

    @property
    def name(self) -> str:
        """The entry's name on disk and in listings: ``<modality>-<64 hex>``."""
        return f"{self.modality.value}-{self.digest.removeprefix('sha256:')}"

    @property
    def short(self) -> str:
        """``video-1a2b3c4d5e6f``: enough to tell entries apart on a screen."""
        return self.name[: len(self.modality.value) + 13]

    def to_record(self) -> dict[str, Any]:
        """Plain JSON: what an entry keeps of its key (``from_record`` reads it back)."""
        return {"version": KEY_VERSION, "modality": self.modality.value, "digest": self.digest,
                "subject": self.subject,
                "parts": {name: {"value": p.value, "label": p.label} for name, p in sorted(self.parts.items())}}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CacheKey:
        """The key ``to_record`` wrote.

        Raises:
            ValueError: the record is not a key of this version, or its parts do not give its digest.
        """
        if record.get("version") != KEY_VERSION:
            raise ValueError(f"key record version {record.get('version')!r}, expected {KEY_VERSION}")
        raw_parts = record.get("parts")
        if not isinstance(raw_parts, Mapping):
            raise ValueError("key record without parts")
        parts = {str(name): Part(str(p["value"]), str(p["label"])) for name, p in raw_parts.items()}
        key = cls(Modality(str(record.get("modality"))), parts, str(record.get("subject") or ""))
        if key.digest != record.get("digest"):
            raise ValueError(f"key record's parts give {key.digest}, not its recorded {record.get('digest')}")
        return key


def latent_key(modality: Modality, *, media: Identity, bucket: str, vae: Identity, trainer: Identity,
               flags: LatentFlags = LatentFlags(), subject: str = "") -> CacheKey:
    """The key of a clip's video, audio or reference latents.

    Args:
        modality: ``VIDEO``, ``AUDIO`` or ``REFERENCE``.
        media: the media file's content digest (``cache.digests.MediaDigests``), labelled with its name.
        bucket: the bucket the clip lands in, ``WxHxF`` (for references, the scaled bucket; for audio
            from an audio column, whatever bounds its duration).
        vae: the identity of the VAE weights (the checkpoint, or a split pack's VAE file).
        trainer: the identity of the code that encodes (``cache.digests.trainer_identity``).
        flags: the preprocessing flags; only those that change this modality's bytes are keyed.
        subject: the row's media name, for explanations only.

    Raises:
        ValueError: ``modality`` is ``CONDITION`` (use ``condition_key``).
    """
    if modality is Modality.CONDITION:
        raise ValueError("text conditions are keyed by condition_key")
    parts = {"media": Part(media.value, media.label), "bucket": Part(bucket, bucket),
             "vae": Part(vae.value, vae.label), "trainer": Part(trainer.value, trainer.label),
             **flags.parts(modality)}
    return CacheKey(modality, parts, subject)


def condition_key(*, prompt: str, text_encoder: Identity, checkpoint: Identity, trainer: Identity,
                  load_in_8bit: bool, subject: str = "") -> CacheKey:
    """The key of one caption's text conditions.

    Args:
        prompt: the caption as the encoder sees it (``caption_as_seen``).
        text_encoder: the text encoder's identity.
        checkpoint: the checkpoint's identity: the trainer's embeddings processor (the text projections)
            is read from it (``embedding_weight_paths``), so another checkpoint gives other conditions.
        trainer: the identity of the code that encodes.
        load_in_8bit: ``--load-text-encoder-in-8bit``.
        subject: the row's media name, for explanations only.
    """
    label = prompt if len(prompt) <= 60 else prompt[:57] + "..."
    parts = {"caption": Part(prompt, label), "text_encoder": Part(text_encoder.value, text_encoder.label),
             "checkpoint": Part(checkpoint.value, checkpoint.label), "trainer": Part(trainer.value, trainer.label),
             "flag:load_in_8bit": _flag("load_in_8bit", load_in_8bit)}
    return CacheKey(Modality.CONDITION, parts, subject)


