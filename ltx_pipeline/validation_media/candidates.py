"""A dataset's rows as validation candidates, and the template's validation samples.

A candidate is named by its media file (absolute, as preprocessing opens it); whether its clip has
sound comes from the probe's facts where they know the file (keyed by path as probed, or its real
path), else it stays unknown and the WAV extraction says so if the clip turns out silent.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.evaluation import caption_of
from ltx_pipeline.ltx.metadata import resolve_media
from ltx_pipeline.ltx.validation_sources import Candidate
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["candidates_from_folder", "candidates_from_rows", "template_samples"]

_MEDIA_COLUMNS = ("video", "media_path", "audio", "reference_video", "ref_media_path", "reference_audio",
                  "video_mask", "audio_mask")


def template_samples(template: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The template's ``validation.samples`` (plain data) and its ``validation.video_dims``."""
    values = load_yaml(template.read_text(encoding="utf-8")) or {}
    validation = values.get("validation") or {}
    samples = [dict(s) for s in validation.get("samples") or [] if isinstance(s, dict)]
    dims = [int(d) for d in validation.get("video_dims") or (960, 544, 89)]
    return samples, dims


def _has_sound(path: str, facts: Mapping[str, Mapping[str, Any]]) -> bool | None:
    for key in (path, os.path.realpath(path)):
        fact = facts.get(key)
        if fact is not None:
            return bool(fact.get("has_audio"))
    return None


def candidates_from_rows(rows: Sequence[Mapping[str, Any]], base: Path, facts: Mapping[str, Mapping[str, Any]], *,
                         held_out: bool = False, left_out: Iterable[str] = ()) -> list[Candidate]:
    """One candidate per row of a metadata file whose media path is set.

    Args:
        rows: the metadata rows, in file order.
        base: the folder their relative paths are relative to.
        facts: the probe's facts per clip path (``has_audio``).
        held_out: whether these are the holdout file's rows.
        left_out: clips the plan leaves out of training (``--audio on``'s silent clips): never chosen.
    """
    skipped = {os.path.realpath(p) for p in left_out}
    found = []
    for index, row in enumerate(rows):
        columns = {column: str(resolve_media(base, str(row[column]))) for column in _MEDIA_COLUMNS
                   if isinstance(row.get(column), str) and str(row[column]).strip()}
        source = columns.get("video") or columns.get("media_path") or columns.get("audio")
        if source is None or os.path.realpath(source) in skipped:
            continue
        found.append(Candidate(source, index, held_out, columns, _has_sound(source, facts), caption_of(dict(row))))
    return found


def candidates_from_folder(facts: Mapping[str, Mapping[str, Any]], *, left_out: Iterable[str] = ()) -> list[Candidate]:
    """A folder's clips (sorted by path) before prepare stages and captions them: no row, no caption yet."""
    skipped = {os.path.realpath(p) for p in left_out}
    found = []
    for path in sorted(facts):
        kind = facts[path].get("kind")
        if kind not in ("video", "audio") or os.path.realpath(path) in skipped:
            continue
        column = "video" if kind == "video" else "audio"
        found.append(Candidate(path, None, False, {column: path}, bool(facts[path].get("has_audio")), None))
    return found
