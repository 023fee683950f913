"""Dataset probing: what ``--dataset`` points at, and what is in it.

Owns the classification of a dataset path into one of five kinds (a metadata file, a folder of
raw media, one video file, a ``.precomputed`` folder, a prior run's outputs) and the readers that gather the facts
the plan needs about each: rows, columns, the caption column, missing media, precomputed counts
and resumable checkpoints, with a warning and next step for each problem found. Unusable inputs
raise ``BadDataset`` with one line. Metadata conventions follow the trainer's ``process_dataset.py``:
media paths are relative to the metadata file, ``caption`` is the default caption column,
``media_path`` and ``ref_media_path`` are legacy aliases.

This is the public module of the dataset probe: it re-exports the records and extension sets of
``_dataset_records`` and the clip listing and reading (PyAV) of ``_clips``. Invariant:
read-only (nothing here writes), and imports run one way: this module imports those two, they
never import it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltx_pipeline.checkpoints.files import STATE_RE as _STATE
from ltx_pipeline.checkpoints.files import WEIGHTS_RE as _WEIGHTS
from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.metadata import metadata_columns, read_metadata_rows, resolve_media
from ltx_pipeline.probing._clips import ClipsReport, media_files, media_rows, read_clips
from ltx_pipeline.probing._dataset_records import (
    AUDIO_EXTENSIONS,
    IMAGE_EXTENSIONS,
    METADATA_EXTENSIONS,
    VIDEO_EXTENSIONS,
    DatasetInfo,
    MediaColumn,
    MediaFolderInfo,
    MetadataInfo,
    PrecomputedInfo,
    PriorRunInfo,
    RunCheckpoint,
)

__all__ = [
    "AUDIO_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "METADATA_EXTENSIONS",
    "VIDEO_EXTENSIONS",
    "DatasetInfo",
    "MediaColumn",
    "MediaFolderInfo",
    "MetadataInfo",
    "PrecomputedInfo",
    "PriorRunInfo",
    "RunCheckpoint",
    "classify_dataset",
    "ClipsReport",
    "media_rows",
    "read_clips",
    "media_files",
]

MEDIA_COLUMNS = ("video", "media_path", "audio", "reference_video", "ref_media_path",
                 "reference_audio", "video_mask", "audio_mask")
LEGACY_ALIASES = {"media_path": "video", "ref_media_path": "reference_video"}
CAPTION_COLUMNS = ("caption", "text", "prompt", "captions", "description")
_MAX_EXAMPLES = 10
_FIX_PATH = ("pass --dataset a folder of videos, a .csv/.json/.jsonl metadata file, a .precomputed "
             "folder or a prior run's output folder")


def _bad(what: str, path: Path, fix: str = _FIX_PATH) -> BadDataset:
    return BadDataset(what, where=str(path), fix=fix)


def _media_column(rows: list[dict[str, Any]], column: str, base: Path) -> MediaColumn:
    values = [row.get(column) for row in rows]
    named = [value for value in values if isinstance(value, str) and value.strip()]
    missing = [value for value in named if not _is_file(resolve_media(base, value.strip()))]
    return MediaColumn(column, len(named), len(missing), tuple(missing[:_MAX_EXAMPLES]))


def _metadata_info(path: Path) -> tuple[MetadataInfo, list[str]]:
    rows = read_metadata_rows(path)
    columns = metadata_columns(rows)
    base = path.parent
    caption = next((name for name in CAPTION_COLUMNS if name in columns), None)
    warnings: list[str] = []
    empty = 0
    if caption is None:
        warnings.append("No caption column: add a `caption` column or caption the clips "
                        "before preprocessing.")
    else:
        empty = sum(1 for row in rows if not str(row.get(caption) or "").strip())
        if caption != "caption":
            warnings.append(f"Captions are in column `{caption}`, but the trainer reads `caption` by "
                            f"default: rename column `{caption}` to `caption` in {path.name}.")
        if empty:
            warnings.append(f"{empty} row(s) have an empty caption: fill them in.")
    media = tuple(_media_column(rows, name, base) for name in MEDIA_COLUMNS if name in columns)
    if not {"video", "media_path", "audio"} & set(columns):
        warnings.append("No `video` or `audio` column: add one naming each clip, relative to the "
                        "metadata file.")
    for name in LEGACY_ALIASES:
        if name in columns:
            warnings.append(f"`{name}` is a legacy alias of `{LEGACY_ALIASES[name]}`: consider renaming it.")
    for col in media:
        if col.missing:
            warnings.append(f"{col.missing} file(s) in `{col.column}` do not exist "
                            f"(e.g. {col.missing_examples[0]}): fix the paths, which are relative to {base}.")
    sibling = base / ".precomputed"
    precomputed = _precomputed_info(sibling) if sibling.is_dir() else None
    info = MetadataInfo(path.suffix.lower().lstrip("."), len(rows), columns, caption, empty, media,
                        precomputed)
    return info, warnings


def _precomputed_info(path: Path) -> PrecomputedInfo:
    counts: dict[str, int] = {}
    leftovers = 0
    for child in sorted(path.iterdir()):
        if not child.is_dir():
            continue
        count = 0
        for _root, _dirs, files in os.walk(child):
            count += sum(1 for name in files if name.endswith(".pt"))
            leftovers += sum(1 for name in files if ".pt.tmp" in name)
        counts[child.name] = count
    return PrecomputedInfo(str(path), counts, leftovers)


def _precomputed_warnings(info: PrecomputedInfo) -> list[str]:
    warnings = []
    if not any(info.subfolders.values()):
        warnings.append("The .precomputed folder holds no .pt files: preprocess the dataset again.")
    if info.leftover_tmp_files:
        warnings.append(f"{info.leftover_tmp_files} unfinished .pt.tmp file(s): preprocessing was "
                        "interrupted; re-run it (finished files are skipped).")
    nonzero = {name: n for name, n in info.subfolders.items() if n}
    if len(set(nonzero.values())) > 1:
        warnings.append("Subfolders hold different numbers of samples "
                        f"({', '.join(f'{k} {v}' for k, v in nonzero.items())}): the trainer skips unmatched "
                        "samples; re-run preprocessing to complete them.")
    return warnings


def _scan_media(folder: Path) -> MediaFolderInfo:
    by_extension: dict[str, int] = {}
    for _root, dirs, files in os.walk(folder):
        dirs[:] = sorted(name for name in dirs if not name.startswith("."))
        for name in files:
            suffix = Path(name).suffix.lower()
            if suffix in VIDEO_EXTENSIONS | IMAGE_EXTENSIONS | AUDIO_EXTENSIONS and not name.startswith("."):
                by_extension[suffix] = by_extension.get(suffix, 0) + 1
    metadata = tuple(sorted(child.name for child in folder.iterdir()
                            if child.is_file() and child.suffix.lower() in METADATA_EXTENSIONS))

    def total(kinds: frozenset[str]) -> int:
        return sum(n for ext, n in by_extension.items() if ext in kinds)

    return MediaFolderInfo(total(VIDEO_EXTENSIONS), total(IMAGE_EXTENSIONS), total(AUDIO_EXTENSIONS),
                           dict(sorted(by_extension.items())), metadata)


def _prior_run_info(folder: Path) -> PriorRunInfo | None:
    has_config = (folder / "training_config.yaml").is_file()
    candidates = (folder / "checkpoints", folder / "outputs" / "checkpoints")
    checkpoints_dir = next((d for d in candidates if d.is_dir()), None)
    weights: dict[int, Path] = {}
    states: dict[int, Path] = {}
    if checkpoints_dir is not None:
        for child in checkpoints_dir.iterdir():
            if (match := _WEIGHTS.match(child.name)) and child.is_file():
                weights[int(match.group(2))] = child
            elif (match := _STATE.match(child.name)) and child.is_file():
                states[int(match.group(1))] = child
    if not (weights or states or has_config):
        return None
    complete = tuple(
        RunCheckpoint(step, str(weights[step]), str(states[step]),
                      "lora" if weights[step].name.startswith("lora_") else "full")
        for step in sorted(set(weights) & set(states), reverse=True)
    )
    return PriorRunInfo(str(checkpoints_dir) if checkpoints_dir else None, complete,
                        tuple(sorted(set(weights) - set(states), reverse=True)),
                        tuple(sorted(set(states) - set(weights), reverse=True)), has_config)


def _prior_run_warnings(info: PriorRunInfo) -> list[str]:
    if info.checkpoints:
        return [f"A prior run with checkpoints up to step {info.checkpoints[0].step} is here: decide "
                "whether to resume from it or start fresh in a new run."]
    if info.weights_without_state:
        return [f"Weights up to step {info.weights_without_state[0]} but no training state: resuming "
                "restarts the step counter at 0."]
    return ["No complete checkpoint (weights plus training state) was found: start a fresh run."]


def _is_file(path: Path) -> bool:
    """``Path.is_file`` that treats any OS error (e.g. a name too long for the filesystem) as missing."""
    try:
        return path.is_file()
    except OSError:
        return False


def classify_dataset(path: Path) -> DatasetInfo:
    """Classify ``--dataset`` and gather what the plan needs about it.

    Args:
        path: a metadata file, a media folder, a ``.precomputed`` folder (or one containing it),
            or a prior run's output folder.

    Returns:
        A ``DatasetInfo`` with the part for its kind filled in, and warnings with next steps.

    Raises:
        BadDataset: the path is missing, unreadable, malformed, of an unsupported type, or empty.
    """
    path = path.expanduser().absolute()
    if not path.exists():
        raise _bad("Dataset path does not exist", path)
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix in METADATA_EXTENSIONS:
            meta, warnings = _metadata_info(path)
            if meta.precomputed is not None:
                warnings += _precomputed_warnings(meta.precomputed)
            return DatasetInfo("metadata", str(path), metadata=meta, warnings=tuple(warnings))
        if suffix in VIDEO_EXTENSIONS:  # one long video: the prepare phase splits it into scenes
            media = MediaFolderInfo(videos=1, images=0, audio=0, by_extension={suffix: 1})
            return DatasetInfo("video_file", str(path), media=media)
        raise _bad(f"Unsupported dataset file type {suffix or '(no extension)'!r}", path, _FIX_PATH)
    if not path.is_dir():
        raise _bad("Dataset path is neither a file nor a folder", path)
    try:
        if path.name == ".precomputed":
            pre = _precomputed_info(path)
            return DatasetInfo("precomputed", str(path), precomputed=pre,
                               warnings=tuple(_precomputed_warnings(pre)))
        prior = _prior_run_info(path)
        if prior is not None:
            return DatasetInfo("prior_run", str(path), prior_run=prior,
                               warnings=tuple(_prior_run_warnings(prior)))
        media = _scan_media(path)
        if (path / ".precomputed").is_dir():
            pre = _precomputed_info(path / ".precomputed")
            return DatasetInfo("precomputed", str(path), media=media, precomputed=pre,
                               warnings=tuple(_precomputed_warnings(pre)))
    except PermissionError as exc:
        raise _bad(f"Cannot read dataset folder: {exc.strerror}", Path(exc.filename or path),
                   "check its permissions") from exc
    if media.videos + media.images + media.audio == 0:
        found = f" (metadata files: {', '.join(media.metadata_files)})" if media.metadata_files else ""
        raise _bad(f"Dataset folder holds no media, .precomputed folder or checkpoints{found}", path,
                   "add clips (.mp4 .mov .mkv .webm .avi, images or audio), or pass the metadata file itself")
    warnings = [f"Found {name} here: pass it as --dataset to use its captions."
                for name in media.metadata_files]
    return DatasetInfo("videos_folder", str(path), media=media, warnings=tuple(warnings))
