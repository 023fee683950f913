"""Reading a dataset metadata file (.csv/.json/.jsonl) into rows, as the trainer's preprocessing does.

Owns the row reader the data-check rules use, and the trainer's naming rule that maps a media path
to the relative ``.pt`` name every ``.precomputed/`` subfolder stores it under (facts §6.2). It
lives in ``ltx/`` so that both the probe and the data-check rules read metadata the same way.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path, PurePosixPath
from typing import Any

from ltx_pipeline.errors import BadDataset

__all__ = ["metadata_columns", "read_metadata_rows", "reference_audio_names", "resolve_media", "sample_name"]

_EXTRA = "\0extra"
_KNOWN_COLUMNS = {"caption", "text", "prompt", "captions", "description", "video", "media_path", "audio",
                  "reference_video", "ref_media_path", "reference_audio", "video_mask", "audio_mask"}
_MEDIA_SUFFIXES = {".mp4", ".mov", ".mkv", ".webm", ".avi", ".png", ".jpg", ".jpeg", ".wav", ".mp3", ".flac"}


def _bad(what: str, path: Path, fix: str) -> BadDataset:
    return BadDataset(what, where=str(path), fix=fix)


def read_metadata_rows(path: Path) -> list[dict[str, Any]]:
    """Read the rows of a metadata file.

    Args:
        path: a ``.csv`` (header row), ``.json`` (a list of objects) or ``.jsonl`` file.

    Returns:
        One dict per row; CSV keys are stripped of surrounding spaces.

    Raises:
        BadDataset: unreadable, not UTF-8, malformed, of another type, or without rows.
    """
    suffix = path.suffix.lower()
    if suffix not in {".csv", ".json", ".jsonl"}:
        raise _bad(f"Unsupported metadata file type {suffix or '(no extension)'!r}", path,
                   "use a .csv, .json or .jsonl metadata file")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad(f"Metadata file is not UTF-8 text (byte {exc.start})", path, "save it as UTF-8") from exc
    except OSError as exc:
        raise _bad(f"Cannot read metadata file: {exc.strerror or exc}", path,
                   "check that it exists and is a readable regular file") from exc
    if suffix == ".json":
        rows = _json_rows(text, path)
    elif suffix == ".jsonl":
        rows = _jsonl_rows(text, path)
    else:
        rows = _csv_rows(text, path)
    if not rows:
        raise _bad("Metadata file has no rows", path, "add one row per clip")
    return rows


def _json_rows(text: str, path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(f"Malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path,
                   "fix the JSON at that position") from exc
    if not isinstance(data, list) or not all(isinstance(row, dict) for row in data):
        raise _bad("JSON metadata is not a list of objects", path,
                   'write a list like [{"caption": "...", "video": "videos/a.mp4"}]')
    return data


def _jsonl_rows(text: str, path: Path) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _bad(f"JSONL line {number} is not valid JSON ({exc.msg})", path,
                       "write one JSON object per line") from exc
        if not isinstance(row, dict):
            raise _bad(f"JSONL line {number} is not a JSON object", path, "write one JSON object per line")
        rows.append(row)
    return rows


def _csv_rows(text: str, path: Path) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text), restkey=_EXTRA, strict=True)
    rows = []
    try:
        if not reader.fieldnames:
            raise _bad("CSV metadata has no header row", path, "add a header such as `caption,video`")
        header = [name.strip() for name in reader.fieldnames]
        if not set(header) & _KNOWN_COLUMNS and any(Path(name).suffix.lower() in _MEDIA_SUFFIXES for name in header):
            raise _bad("CSV metadata has no header row (its first row holds a media path)", path,
                       "add a header such as `caption,video` as the first line")
        for row in reader:
            if _EXTRA in row:
                raise _bad(f"CSV line {reader.line_num} has more fields than the header", path,
                           "quote fields that contain commas")
            rows.append({key.strip(): value for key, value in row.items()})
    except csv.Error as exc:
        raise _bad(f"Malformed CSV at line {reader.line_num}: {exc}", path, "fix the quoting on that line") from exc
    return rows


def metadata_columns(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """Every column any row has, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return tuple(seen)


def resolve_media(base: Path, value: str) -> Path:
    """A media path as preprocessing opens it: absolute as written, else relative to ``base``."""
    media = Path(value.strip()).expanduser()
    return media if media.is_absolute() else base / media


def sample_name(base: Path, value: str) -> str:
    """The relative ``.pt`` name preprocessing gives a clip in every ``.precomputed/`` subfolder.

    The trainer names it lexically, as ``process_videos._output_relative`` does: the media path as
    written, joined to the metadata file's folder, relative to that folder; symlinks are not followed
    (a prepared dataset stages its clips as links under ``media/``, and ``media/clip_000.mp4`` gives
    ``media/clip_000.pt`` wherever the link points). A clip outside the folder mirrors its absolute
    path (``/mnt/x/a.mp4`` → ``mnt/x/a.pt``).

    Args:
        base: the folder holding the metadata file, as preprocessing was given it.
        value: the media path as written in the metadata.

    Returns:
        A POSIX relative path ending in ``.pt``.
    """
    media = base / value.strip()  # an absolute value replaces base, as in the trainer
    try:
        relative = media.relative_to(base)
    except ValueError:
        relative = Path(*media.parts[1:]) if media.is_absolute() else media
    return str(PurePosixPath(*relative.with_suffix(".pt").parts))


def reference_audio_names(rows: list[dict[str, Any]], base: Path) -> list[tuple[str, str]]:
    """(the name preprocessing gives a row's reference-audio latent, the name training looks it up under).

    For a dataset without a video column (a2a) the trainer's preprocessing names the latent after the
    reference file, while its dataset expects the primary audio's name; rows where both agree are left out.
    """
    pairs = []
    for row in rows:
        audio, reference = row.get("audio"), row.get("reference_audio")
        if isinstance(audio, str) and audio.strip() and isinstance(reference, str) and reference.strip():
            written, wanted = sample_name(base, reference), sample_name(base, audio)
            if written != wanted:
                pairs.append((written, wanted))
    return pairs
