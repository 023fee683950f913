"""Clip listing and reading: the visual media of a dataset path, and the facts of each, via PyAV.

This module owns ``media_files`` (the clips a metadata file names, or the videos and images under a
folder, each with its metadata row number) and ``read_clips`` (frames, fps, size and audio of every
clip through ``ltx.media``, which needs no system binary). Invariant: read-only on the media; a clip
that cannot be read is reported with its reason and row, never raised. A ``FactsCache`` (the engine's
store, through the journal) returns the facts of clips read before at the same size and mtime, so
only new or changed clips are decoded; unreadable clips are never cached (the user may fix them).
It imports the extension sets from ``_dataset_records`` and nothing else from the package.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ltx_pipeline.ltx.media import BadMedia, read_media_info
from ltx_pipeline.ltx.metadata import metadata_columns, read_metadata_rows, resolve_media
from ltx_pipeline.probing._dataset_records import IMAGE_EXTENSIONS, METADATA_EXTENSIONS, VIDEO_EXTENSIONS

__all__ = ["ClipsReport", "FactsCache", "media_files", "media_rows", "read_clips"]


class FactsCache(Protocol):
    """Facts of media files read before, keyed by (path, size, mtime_ns)."""

    def cached_media_facts(self, keys: list[tuple[str, int, int]]) -> dict[str, dict[str, Any]]: ...

    def remember_media_facts(self, rows: list[tuple[str, int, int, dict[str, Any]]]) -> None: ...


def media_files(path: Path) -> list[Path]:
    """The visual media of a dataset path, in row (or name) order; see ``media_rows``."""
    return [media for _, media in media_rows(path)]


def media_rows(path: Path) -> list[tuple[int | None, Path]]:
    """(row number, media path) for each clip of a dataset path.

    A metadata file gives its ``video`` (or legacy ``media_path``) column resolved against its
    folder, numbered from 1 in file order; a folder gives its videos and images, sorted, with no
    row number. Other kinds give an empty list.
    """
    path = path.expanduser().absolute()
    if path.is_file() and path.suffix.lower() in METADATA_EXTENSIONS:
        rows = read_metadata_rows(path)
        column = "video" if "video" in metadata_columns(rows) else "media_path"
        return [(number, resolve_media(path.parent, row[column].strip())) for number, row in enumerate(rows, start=1)
                if isinstance(row.get(column), str) and row[column].strip()]
    if path.is_file() and path.suffix.lower() in VIDEO_EXTENSIONS:  # one long video, split by prepare
        return [(None, path)]
    if path.is_dir() and path.name != ".precomputed":
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = [name for name in dirs if not name.startswith(".")]
            found += [Path(root) / name for name in files if not name.startswith(".")
                      and Path(name).suffix.lower() in VIDEO_EXTENSIONS | IMAGE_EXTENSIONS]
        return [(None, media) for media in sorted(found)]
    return []


@dataclass
class ClipsReport:
    """What reading every clip found: facts per readable clip, the reason per unreadable one."""

    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    unreadable: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> {"row", "reason"}
    from_cache: int = 0  # clips whose facts came from the cache (not decoded this time)

    @property
    def counts(self) -> dict[str, int | None]:
        """clip -> frames (None where unreadable), the shape the bucket checks take."""
        return {**{clip: f["frames"] for clip, f in self.facts.items()}, **dict.fromkeys(self.unreadable)}

    def spread(self) -> dict[str, Any]:
        """Distinct frame rates and sizes with their clip counts, and how many clips have audio."""
        fps = Counter(round(f["fps"], 3) for f in self.facts.values() if f["kind"] == "video")
        sizes = Counter(f"{f['width']}x{f['height']}" for f in self.facts.values())
        return {"fps": dict(sorted(fps.items())), "sizes": dict(sizes.most_common()),
                "with_audio": sum(1 for f in self.facts.values() if f["has_audio"]), "clips": len(self.facts)}

    def to_dict(self) -> dict[str, Any]:
        known = [n for n in self.counts.values() if n is not None]
        return {"counts": self.counts, "min_frames": min(known) if known else None, "facts": self.facts,
                "unreadable": self.unreadable, "spread": self.spread()}


def read_clips(clips: Sequence[tuple[int | None, Path]],
               on_progress: Callable[[int, int], None] | None = None,
               cache: FactsCache | None = None) -> ClipsReport:
    """Read every clip's facts with PyAV (or the cache); ``on_progress(done, total)`` after each clip."""
    report = ClipsReport()
    stats = {str(clip): _stat(clip) for _, clip in clips}
    keys = [(path, *stat) for path, stat in stats.items() if stat is not None]
    cached = cache.cached_media_facts(keys) if cache is not None and keys else {}
    fresh: list[tuple[str, int, int, dict[str, Any]]] = []
    for done, (row, clip) in enumerate(clips, start=1):
        path, stat = str(clip), stats[str(clip)]
        if path in cached:
            report.facts[path] = cached[path]
            report.from_cache += 1
        else:
            try:
                info = read_media_info(clip)
            except BadMedia as exc:
                report.unreadable[path] = {"row": row, "reason": exc.reason}
            else:
                report.facts[path] = {"kind": info.kind, "frames": info.frames, "frames_source": info.frames_source,
                                      "fps": info.fps, "width": info.width, "height": info.height,
                                      "duration_s": info.duration_s, "has_audio": info.has_audio,
                                      "audio_sample_rate": info.audio_sample_rate}
                if stat is not None:
                    fresh.append((path, *stat, report.facts[path]))
        if on_progress is not None:
            on_progress(done, len(clips))
    if cache is not None and fresh:
        cache.remember_media_facts(fresh)
    return report


def _stat(clip: Path) -> tuple[int, int] | None:
    try:
        status = clip.stat()
    except OSError:
        return None  # missing or unopenable: read_media_info names why
    return status.st_size, status.st_mtime_ns
