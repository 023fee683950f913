"""Clip listing and frame counting: the visual media of a dataset path, and their frames via ffprobe.

This module owns ``media_files`` (the clips a metadata file names, or the videos and images under a
folder) and ``clip_frame_counts`` (frames per clip through ``ffprobe``, images counting as 1).
Invariant: read-only and bounded: ffprobe runs as an argv list without a shell, one clip at a time
under a timeout, and only for at most ``limit`` clips; a clip it cannot measure counts as None
rather than raising. It imports the extension sets from ``_dataset_records`` and nothing else from
the package.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ltx_pipeline.ltx.metadata import metadata_columns, read_metadata_rows, resolve_media
from ltx_pipeline.probing._dataset_records import IMAGE_EXTENSIONS, METADATA_EXTENSIONS, VIDEO_EXTENSIONS

__all__ = ["clip_frame_counts", "media_files"]


def media_files(path: Path) -> list[Path]:
    """The visual media of a dataset path, for ``clip_frame_counts``.

    A metadata file gives its ``video`` (or legacy ``media_path``) column resolved against its
    folder; a folder gives its videos and images, sorted. Other kinds give an empty list.
    """
    path = path.expanduser().absolute()
    if path.is_file() and path.suffix.lower() in METADATA_EXTENSIONS:
        rows = read_metadata_rows(path)
        column = "video" if "video" in metadata_columns(rows) else "media_path"
        return [resolve_media(path.parent, row[column].strip()) for row in rows
                if isinstance(row.get(column), str) and row[column].strip()]
    if path.is_dir() and path.name != ".precomputed":
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = [name for name in dirs if not name.startswith(".")]
            found += [Path(root) / name for name in files if not name.startswith(".")
                      and Path(name).suffix.lower() in VIDEO_EXTENSIONS | IMAGE_EXTENSIONS]
        return sorted(found)
    return []


def clip_frame_counts(paths: list[Path], ffprobe: str | None, limit: int = 300,
                      timeout: float = 10) -> dict[str, int | None]:
    """Count the frames of each clip with ffprobe (images count as 1 without running it).

    Args:
        paths: clips to measure.
        ffprobe: the ffprobe executable, None when absent.
        limit: above this many clips nothing is measured (the skill probes small datasets only).
        timeout: seconds per clip.

    Returns:
        ``{str(path): frames or None}``; None where ffprobe failed. Empty when there are more than
        ``limit`` clips, or when ffprobe is None and some clip is not an image.
    """
    if len(paths) > limit:
        return {}
    if ffprobe is None and any(p.suffix.lower() not in IMAGE_EXTENSIONS for p in paths):
        return {}
    counts: dict[str, int | None] = {}
    for clip in paths:
        if clip.suffix.lower() in IMAGE_EXTENSIONS:
            counts[str(clip)] = 1 if clip.is_file() else None
            continue
        counts[str(clip)] = _ffprobe_frames(str(ffprobe), clip, timeout)
    return counts


def _ffprobe_frames(ffprobe: str, clip: Path, timeout: float) -> int | None:
    argv = [ffprobe, "-v", "error", "-select_streams", "v:0", "-count_packets",
            "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", str(clip)]
    try:
        # argv list, no shell: the clip path may contain any character.
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",  # noqa: S603
                              timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = done.stdout.strip().split("\n", 1)[0].strip().rstrip(",")
    return int(first) if done.returncode == 0 and first.isdigit() else None
