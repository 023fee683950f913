"""The records of config patching: a requested patch, an applied one, and the prompt rewrite.

Owns ``Patch`` (what to set, where, why), ``PatchRecord`` (what actually changed, kept for
``status`` and plan.md's config table), the ``MISSING`` marker for keys a patch added, and
``PromptRewrite``, the one patch value that depends on the template's own text: validation
prompts keep the template's wording and gain the trigger word and, for audio runs, a sound
description. Everything here is pure and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AUDIO_SENTENCE", "MISSING", "Patch", "PatchRecord", "PromptRewrite"]


class _Missing:
    """The old value of a key that did not exist before its patch."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()

# Appended to a prompt of an audio-generating run that says nothing about sound. The trainer's
# captions describe audio in a closing sentence ("The audio features ..."), so this mirrors them.
AUDIO_SENTENCE = "The audio features natural ambient sound that matches the scene."
_AUDIO_WORDS = re.compile(
    r"\b(audio|sounds?|soundtrack|music(al)?|melod(y|ic|ies)|rhythm|beats|songs?|sing(s|ing)?|vocals?|voices?"
    r"|speech|speaking|dialogue|noises?|hears?|heard|silen(t|ce))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Patch:
    """One requested change of a trainer config.

    Attributes:
        path: dotted path; list items by index, e.g. ``validation.samples.0.prompt``.
        value: a YAML-able value (None, bool, int, float, str, lists and str-keyed dicts of
            those) or a ``PromptRewrite``.
        reason: why, shown next to the change in status and plan.md.
    """

    path: str
    value: Any
    reason: str


@dataclass(frozen=True)
class PatchRecord:
    """One change that was made: old and new value as ``yaml.safe_load`` (so the trainer) reads them.

    Attributes:
        path: dotted path of the changed value.
        old: the previous value; None when the key was added (see ``added``).
        new: the value now in the config.
        reason: the patch's reason.
        added: True when the key did not exist before.
    """

    path: str
    old: Any
    new: Any
    reason: str
    added: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict of the record."""
        return asdict(self)


@dataclass(frozen=True)
class PromptRewrite:
    """Rewrite every validation prompt at a path, keeping the template's wording.

    Applied at ``validation.samples`` it rewrites each sample's ``prompt``; at the deprecated
    ``validation.prompts`` (a list of strings) each string. An absent path changes nothing.

    Attributes:
        trigger: the LoRA's trigger word, put in front of each prompt that lacks it; None keeps
            the prompts' wording.
        describe_audio: append ``AUDIO_SENTENCE`` to prompts that mention no sound.
        strip_audio: drop the sentences that describe sound (a video-only run of a template whose
            prompts describe its audio: the samples have no sound, so the prompt must not promise one).
    """

    trigger: str | None
    describe_audio: bool
    strip_audio: bool = False

    def rewrite(self, prompt: str) -> str:
        """The rewritten prompt; applying it twice changes nothing more."""
        text = prompt
        if self.strip_audio:
            text = _without_sound_sentences(text)
        if self.trigger and not _mentions(text, self.trigger):
            text = f"{self.trigger} {text}"
        if self.describe_audio and not _AUDIO_WORDS.search(text):
            body = text.rstrip()
            text = f"{body}{'' if body.endswith(('.', '!', '?')) or not body else '.'} {AUDIO_SENTENCE}".lstrip()
        return text

    def expand(self, path: str, current: Any, reason: str) -> list[Patch]:
        """Concrete per-prompt patches for the value currently at ``path``.

        Args:
            path: where this rewrite was requested.
            current: the value there (a list of samples or of prompt strings; anything else
                gives no patches).
            reason: the reason each produced patch carries.

        Returns:
            One patch per prompt whose rewrite differs from it.
        """
        if not isinstance(current, list):
            return []
        patches: list[Patch] = []
        for index, item in enumerate(current):
            if isinstance(item, dict) and isinstance(item.get("prompt"), str):
                new = self.rewrite(item["prompt"])
                if new != item["prompt"]:
                    patches.append(Patch(f"{path}.{index}.prompt", new, reason))
            elif isinstance(item, str):
                new = self.rewrite(item)
                if new != item:
                    patches.append(Patch(f"{path}.{index}", new, reason))
        return patches


# A sentence about the soundtrack (the templates close each prompt with "The audio captures ..."): words that
# name sound itself, not a silent scene's stillness.
_SOUND_SENTENCE = re.compile(r"\b(audio|sounds?|soundtrack|music|noises?|voices?|speech|dialogue|vocals?|hum)\b",
                             re.IGNORECASE)


def _without_sound_sentences(text: str) -> str:
    """``text`` without what it says about sound: whole sentences ("The audio captures ..."), or the closing
    clauses of one that begins with the picture ("A fox trots across a field, soft wind noise."); the text itself
    when nothing but sound would be left."""
    kept = [s for s in (_without_sound_clauses(s) for s in re.split(r"(?<=[.!?])\s+", text.strip())) if s]
    return " ".join(kept) if kept else text


def _without_sound_clauses(sentence: str) -> str:
    if not _SOUND_SENTENCE.search(sentence):
        return sentence
    clauses = sentence.rstrip(".!?").split(", ")
    picture = [c for c in clauses if not _SOUND_SENTENCE.search(c)]
    if not picture or picture[0] != clauses[0]:  # the sentence itself is about sound
        return ""
    return ", ".join(picture) + "."


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE) is not None
