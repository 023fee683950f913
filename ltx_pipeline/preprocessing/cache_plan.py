"""What a stage's ``.precomputed`` needs from the latent cache: per metadata row, each file and its key.

Owns turning a metadata file into cache wants without loading a model: per row the files the trainer's
preprocessing writes (``precomputed_layout.row_outputs``), the bucket the trainer will pick for the clip
(read from the clip's header, as its ``process_videos.py`` picks it), and each file's key (the media's
content digest, that bucket, the checkpoint / text encoder / encoder code identities, the caption as the
encoder sees it, the flags that change the bytes). Returns None when the stage cannot be keyed exactly
(roles other than caption and video, a flag it does not know, an unreadable clip, duplicate names): such
a stage is preprocessed whole, as before the cache, so nothing is ever keyed under a guess.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltx_pipeline.cache import (
    CacheKey,
    EntryStore,
    Identity,
    LatentFlags,
    MediaDigests,
    Modality,
    Want,
    caption_as_seen,
    condition_key,
    encoder_identity,
    latent_key,
)
from ltx_pipeline.env_names import LATENT_CACHE_ENV
from ltx_pipeline.ltx.buckets import Bucket
from ltx_pipeline.ltx.media import BadMedia, read_media_info
from ltx_pipeline.ltx.metadata import read_metadata_rows
from ltx_pipeline.ltx.modes import Mode
from ltx_pipeline.ltx.precomputed_layout import PlannedOutput, dataset_roles, row_outputs
from ltx_pipeline.trainer_log import MediaSkipped

__all__ = ["CachePlan", "RowPlan", "cache_store", "landing_bucket", "plan_stage", "unkeyed_reason"]

_KEYED_ROLES = {"caption", "video"}
# process_dataset.py flags the keys account for (anything else: the stage is not keyed).
_KNOWN_FLAGS = {"--skip-audio", "--vae-tiling", "--remove-llm-prefixes", "--load-text-encoder-in-8bit"}
_OFF = {"", "0", "off", "none", "false"}


@dataclass(frozen=True)
class RowPlan:
    """One metadata row: its files with their keys (none for a clip too short for every bucket)."""

    index: int
    row: Mapping[str, Any]
    outputs: tuple[tuple[PlannedOutput, Want], ...]


@dataclass(frozen=True)
class CachePlan:
    """A stage's rows keyed against ``store``; ``skipped`` are the clips the trainer will leave out (too short)."""

    store: EntryStore
    rows: tuple[RowPlan, ...]
    skipped: tuple[MediaSkipped, ...]

    def wants(self) -> list[Want]:
        return [want for row in self.rows for _, want in row.outputs]


def cache_store(workspace: Path) -> EntryStore | None:
    """The latent cache runs use: ``<workspace>/cache/latents``, or the team path in ``LATENT_CACHE_ENV``;
    None when that variable says ``off``."""
    chosen = os.environ.get(LATENT_CACHE_ENV)
    if chosen is not None and chosen.strip().lower() in _OFF:
        return None
    return EntryStore.for_workspace(workspace, Path(chosen) if chosen else None)


def landing_bucket(buckets: Sequence[Bucket], frames: int, width: int, height: int) -> Bucket | None:
    """The bucket the trainer's preprocessing puts a clip in: among those with no more frames than the clip,
    the nearest aspect ratio (in log space), then the most frames, then the largest area; None when none fits."""
    fitting = [b for b in buckets if b.frames <= frames]
    if not fitting:
        return None
    aspect = math.log(width / height) if width and height else 0.0
    return min(fitting, key=lambda b: (abs(aspect - math.log(b.width / b.height)), -b.frames, -b.width * b.height))


@dataclass(frozen=True)
class _Identities:
    checkpoint: Identity
    text_encoder: Identity
    trainer: Identity
    flags: LatentFlags
    trigger: str | None
    remove_prefixes: bool
    in_8bit: bool
    extract_audio: bool


def plan_stage(ctx: Any, *, mode: Mode, metadata_file: Path, buckets: tuple[Bucket, ...],
               files: Mapping[str, Any], extra_flags: Sequence[str]) -> CachePlan | None:
    """Every row's wants, or None when this stage cannot be keyed exactly (then it is preprocessed whole).

    ``files`` is ``model_files``'s record of the checkpoint and text encoder given to preprocessing.
    """
    store = cache_store(ctx.workspace)
    rows = read_metadata_rows(metadata_file)
    if store is None or not rows or set(extra_flags) - _KNOWN_FLAGS or not buckets:
        return None
    roles = dataset_roles(rows[0])
    if set(roles) - _KEYED_ROLES or "video" not in roles:
        return None
    capabilities = ctx.backend.capabilities
    checkout = ctx.backend.checkout_root if capabilities.runs_real_trainer else None
    ids = _Identities(Identity.of_model(files["model"]), Identity.of_model(files["text_encoder"]),
                      encoder_identity(checkout), LatentFlags(vae_tiling="--vae-tiling" in extra_flags),
                      ctx.request.trigger, "--remove-llm-prefixes" in extra_flags,
                      "--load-text-encoder-in-8bit" in extra_flags, "--skip-audio" not in extra_flags)
    planned: list[RowPlan] = []
    skipped: list[MediaSkipped] = []
    with MediaDigests(ctx.workspace) as digests:
        for index, row in enumerate(rows):
            one = _plan_row(index, row, roles, mode, metadata_file.parent, buckets, ids, digests)
            if one is None:
                return None
            if isinstance(one, MediaSkipped):
                skipped.append(one)
                one = RowPlan(index, row, ())  # given to a script that runs anyway: it says so in its words
            planned.append(one)
    names = [want.relative() for row_plan in planned for _, want in row_plan.outputs]
    if len(names) != len(set(names)):
        return None  # two rows name one file: the scripts disagree on which wins
    return CachePlan(store, tuple(planned), tuple(skipped))


def unkeyed_reason(metadata_file: Path, buckets: Sequence[Bucket], extra_flags: Sequence[str]) -> str | None:
    """Why ``plan_stage`` cannot key a stage, as far as its metadata's columns and the flags tell, in words;
    None when they do not stop it (an unreadable clip or two rows naming one file still may)."""
    rows = read_metadata_rows(metadata_file)
    unknown = sorted(set(extra_flags) - _KNOWN_FLAGS)
    if not rows or not buckets:
        return "the metadata has no rows" if not rows else "no bucket is planned"
    if unknown:
        return f"the cache does not key the preprocessing flag(s) {' '.join(unknown)}"
    roles = dataset_roles(rows[0])
    if set(roles) - _KEYED_ROLES or "video" not in roles:
        others = ", ".join(sorted(set(roles) - _KEYED_ROLES)) or "no video"
        return f"its rows have {others} column(s): the cache keys captions and videos only"
    return None


def _plan_row(index: int, row: Mapping[str, Any], roles: Mapping[str, str], mode: Mode, base: Path,
              buckets: tuple[Bucket, ...], ids: _Identities, digests: MediaDigests) -> RowPlan | MediaSkipped | None:
    value = str(row.get(roles["video"]) or "").strip()
    if not value or not isinstance(row.get(roles["caption"]), str):
        return None
    source = Path(value) if Path(value).is_absolute() else base / value
    try:
        info = read_media_info(source)
        media = digests.of(source)
    except (BadMedia, OSError):
        return None  # the script names an unreadable clip in its log; the whole stage runs as before
    bucket = landing_bucket(buckets, info.frames, info.width, info.height)
    if bucket is None:
        smallest = min(b.frames for b in buckets)
        return MediaSkipped(str(source), f"{info.frames} frames, fewer than the smallest bucket's {smallest}")
    outputs = row_outputs(mode, row, base, extract_audio=ids.extract_audio and info.has_audio, roles=roles)
    keyed: list[tuple[PlannedOutput, Want]] = []
    for output in outputs:
        key = _key(output, row, roles, media, str(bucket), ids)
        if key is None:
            return None
        keyed.append((output, Want(key, output.name)))
    return RowPlan(index, row, tuple(keyed))


def _key(output: PlannedOutput, row: Mapping[str, Any], roles: Mapping[str, str], media: Identity, bucket: str,
         ids: _Identities) -> CacheKey | None:
    subject = output.name.removesuffix(".pt")
    if output.role == "caption":
        prompt = caption_as_seen(str(row[roles["caption"]]), trigger=ids.trigger,
                                 remove_llm_prefixes=ids.remove_prefixes)
        return condition_key(prompt=prompt, text_encoder=ids.text_encoder, checkpoint=ids.checkpoint,
                             trainer=ids.trainer, load_in_8bit=ids.in_8bit, subject=subject)
    modality = {"video": Modality.VIDEO, "audio": Modality.AUDIO}.get(output.role)
    if modality is None:
        return None
    return latent_key(modality, media=media, bucket=bucket, vae=ids.checkpoint, trainer=ids.trainer,
                      flags=ids.flags, subject=subject)
