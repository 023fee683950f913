"""Putting a user's own preprocessed file into the cache under a key the caller computed: checked, then copied.

Owns the per-file half of ``ltx-pipeline cache import``: the user's file is copied (never moved, never
changed) into the cache's staging folder, the copy is loaded and its tensors' shapes checked against what
its subfolder holds at the key's bucket (``sample_problem``), and only then installed as the key's entry
under the key's claim. A key that already has an entry is left as it is. Which key a file gets is the
caller's (``driving.cache_import``, which keys rows exactly as a run does).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.cache.entries import EntryStore
from ltx_pipeline.cache.keys import CacheKey
from ltx_pipeline.ltx.buckets import Bucket
from ltx_pipeline.ltx.precomputed import AUDIO_BINS, AUDIO_CHANNELS, LATENT_CHANNELS

__all__ = ["Imported", "import_file", "sample_problem"]

Outcome = Literal["imported", "present", "refused"]


@dataclass(frozen=True)
class Imported:
    """What became of one file: imported as ``key``'s entry, already there, or refused (``why``)."""

    outcome: Outcome
    key: CacheKey
    why: str = ""


def _shape(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    return tuple(int(d) for d in shape) if shape is not None else None


def sample_problem(data: object, folder: str, bucket: Bucket | None) -> str | None:
    """Why ``data`` (a loaded ``.pt``) is not what ``folder`` holds for a clip in ``bucket``; None when it is."""
    if not isinstance(data, Mapping):
        return f"holds a {type(data).__name__}, not a dict of tensors"
    if folder == "latents":
        shape = _shape(data.get("latents"))
        if bucket is None:
            return "its key names no bucket"
        wanted = (LATENT_CHANNELS, bucket.latent_frames, bucket.latent_height, bucket.latent_width)
        if shape != wanted:
            return f"`latents` has shape {list(shape or ())}, expected {list(wanted)} for bucket {bucket}"
    elif folder == "audio_latents":
        shape = _shape(data.get("latents"))
        if shape is None or len(shape) != 3 or shape[0] != AUDIO_CHANNELS or shape[2] != AUDIO_BINS:
            return f"`latents` has shape {list(shape or ())}, expected [{AUDIO_CHANNELS}, T, {AUDIO_BINS}]"
    elif folder == "conditions":
        embeds = _shape(data.get("video_prompt_embeds", data.get("prompt_embeds")))
        mask = _shape(data.get("prompt_attention_mask"))
        if embeds is None or mask is None or len(embeds) != 2 or len(mask) != 1 or embeds[0] != mask[0]:
            return ("expected `video_prompt_embeds` [tokens, D] and `prompt_attention_mask` [tokens], "
                    f"found {sorted(data)}")
    else:
        return f"the cache holds no {folder}/ files"
    return None


def import_file(store: EntryStore, key: CacheKey, source: Path, *, load: Callable[[Path], object],
                problem: Callable[[object], str | None]) -> Imported:
    """Copy ``source`` into the cache as ``key``'s entry once its copy loads and ``problem`` finds nothing.

    The copy is what is checked and installed (moved into place under the key's claim), so a file changed
    meanwhile cannot slip in unchecked; ``source`` is only read.
    """
    if store.get(key) is not None:
        return Imported("present", key)
    store.staging_dir.mkdir(parents=True, exist_ok=True)
    copy = store.staging_dir / f"import-{uuid.uuid4().hex}.pt"
    try:
        shutil.copyfile(source, copy)
        try:
            data = load(copy)
        except Exception as exc:  # noqa: BLE001 - whatever cannot be read stays out of the cache
            return Imported("refused", key, f"does not load ({type(exc).__name__}: {exc})")
        why = problem(data)
        if why is not None:
            return Imported("refused", key, why)
        with store.claim(key, wait=True) as claim:
            if not claim.must_make:
                return Imported("present", key)
            claim.put(copy, move=True, meta={"imported_from": str(source)})
        return Imported("imported", key)
    finally:
        copy.unlink(missing_ok=True)
