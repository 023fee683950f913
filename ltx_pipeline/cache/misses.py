"""Why a key is not in the cache: the nearest earlier key of its modality and the parts that differ, in words.

Owns the vocabulary plan.md and ``cache ls`` use for misses (``NEW_CLIP`` ... ``OTHER_FLAGS``: "new clip",
"caption changed", "other bucket", "other model", "other trainer version", "other flags") and the rule
that picks the nearest earlier key. Pure: it compares the named parts of ``cache.keys.CacheKey``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ltx_pipeline.cache.keys import CacheKey

__all__ = ["CAPTION_CHANGED", "CLIP_CHANGED", "NEW_CAPTION", "NEW_CLIP", "OTHER_BUCKET", "OTHER_FLAGS", "OTHER_MODEL",
           "OTHER_TRAINER", "Miss", "explain_miss"]


NEW_CLIP, CLIP_CHANGED = "new clip", "clip changed"
NEW_CAPTION, CAPTION_CHANGED = "new caption", "caption changed"
OTHER_BUCKET, OTHER_MODEL = "other bucket", "other model"
OTHER_TRAINER, OTHER_FLAGS = "other trainer version", "other flags"
_MODEL_PARTS = frozenset({"vae", "text_encoder", "checkpoint"})
_CONTENT_PARTS = ("media", "caption")


@dataclass(frozen=True)
class Miss:
    """Why a key is not in the cache, next to the nearest earlier key of its modality.

    ``reasons`` are words from a fixed vocabulary (``NEW_CLIP`` ... ``OTHER_FLAGS``), most telling first;
    empty when the key itself was among the earlier ones. ``changes`` names each differing part with its
    old and new labels.
    """

    key: CacheKey
    nearest: CacheKey | None
    reasons: tuple[str, ...]
    changes: Mapping[str, tuple[str, str]]

    @property
    def reason(self) -> str:
        """The main reason, or ``cached``."""
        return self.reasons[0] if self.reasons else "cached"

    def __str__(self) -> str:
        details = "; ".join(f"{name}: {old} -> {new}" for name, (old, new) in self.changes.items()
                            if name not in _CONTENT_PARTS)
        return ", ".join(self.reasons or ("cached",)) + (f" ({details})" if details else "")


def explain_miss(key: CacheKey, earlier: Iterable[CacheKey]) -> Miss:
    """Why ``key`` differs from the nearest of ``earlier`` (same modality), in words from the parts.

    The nearest shares the content part (media or caption) first, then the row's subject, then the most
    parts. A key whose content matches no earlier key of another subject is simply new: the other parts
    of an unrelated neighbour are not reasons.
    """
    candidates = [other for other in earlier if other.modality is key.modality]
    if any(other.digest == key.digest for other in candidates):
        return Miss(key, key, (), {})
    content = next((name for name in _CONTENT_PARTS if name in key.parts), "")

    def closeness(other: CacheKey) -> tuple[bool, bool, int]:
        same = sum(1 for name, part in key.parts.items() if other.parts.get(name, None) == part)
        return (_value(other, content) == _value(key, content), bool(key.subject) and other.subject == key.subject,
                same)

    nearest = max(candidates, key=closeness, default=None)
    new_words = (NEW_CAPTION if content == "caption" else NEW_CLIP,)
    if nearest is None:
        return Miss(key, None, new_words, {})
    changes = {name: (nearest.parts[name].label if name in nearest.parts else "-",
                      key.parts[name].label if name in key.parts else "-")
               for name in sorted(set(key.parts) | set(nearest.parts))
               if key.parts.get(name) != nearest.parts.get(name)}
    same_subject = bool(key.subject) and nearest.subject == key.subject
    if content in changes and not same_subject:
        return Miss(key, nearest, new_words, {content: changes[content]})
    reasons: list[str] = []
    for name in changes:
        word = _reason(name)
        if word not in reasons:
            reasons.append(word)
    order = (CLIP_CHANGED, CAPTION_CHANGED, OTHER_MODEL, OTHER_TRAINER, OTHER_BUCKET, OTHER_FLAGS)
    return Miss(key, nearest, tuple(sorted(reasons, key=lambda w: order.index(w) if w in order else len(order))),
                changes)


def _value(key: CacheKey, name: str) -> str | None:
    part = key.parts.get(name)
    return part.value if part is not None else None


def _reason(part: str) -> str:
    if part == "media":
        return CLIP_CHANGED
    if part == "caption":
        return CAPTION_CHANGED
    if part == "bucket":
        return OTHER_BUCKET
    if part in _MODEL_PARTS:
        return OTHER_MODEL
    return OTHER_TRAINER if part == "trainer" else OTHER_FLAGS
