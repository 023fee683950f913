"""Dataset vocabulary: the file types a dataset path may hold, its four kinds, and the result records.

This module owns what ``classify_dataset`` and ``media_files`` speak in: the video, image, audio and
metadata extension sets, the ``Kind`` of a dataset path (a metadata file, a folder of raw media, a
``.precomputed`` folder, a prior run's outputs) and the frozen dataclasses that describe each kind,
down to ``DatasetInfo`` with its findings-table row. Invariant: records only, no file access: every
record is built by ``dataset`` from what it read, and ``to_dict()`` is plain JSON data. It imports
``Finding`` and ``plain_record`` from the package and nothing from its sibling modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ltx_pipeline.probing import Finding, FindingStatus, plain_record

__all__ = [
    "AUDIO_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "METADATA_EXTENSIONS",
    "VIDEO_EXTENSIONS",
    "DatasetInfo",
    "Kind",
    "MediaColumn",
    "MediaFolderInfo",
    "MetadataInfo",
    "PrecomputedInfo",
    "PriorRunInfo",
    "RunCheckpoint",
]

VIDEO_EXTENSIONS = frozenset({".mp4", ".mov", ".mkv", ".webm", ".avi"})
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg"})
AUDIO_EXTENSIONS = frozenset({".wav", ".mp3", ".flac"})
METADATA_EXTENSIONS = frozenset({".csv", ".json", ".jsonl"})

Kind = Literal["metadata", "videos_folder", "video_file", "precomputed", "prior_run"]


@dataclass(frozen=True)
class MediaColumn:
    """A media column of a metadata file: how many rows name a file, and how many are missing."""

    column: str
    rows_with_path: int
    missing: int
    missing_examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class PrecomputedInfo:
    """A ``.precomputed`` folder: ``.pt`` files per subfolder (recursive) and leftover temp files."""

    path: str
    subfolders: dict[str, int]
    leftover_tmp_files: int = 0


@dataclass(frozen=True)
class MetadataInfo:
    """A .csv/.json/.jsonl metadata file as the trainer's preprocessing reads it."""

    format: str
    rows: int
    columns: tuple[str, ...]
    caption_column: str | None
    empty_captions: int
    media_columns: tuple[MediaColumn, ...]
    precomputed: PrecomputedInfo | None


@dataclass(frozen=True)
class MediaFolderInfo:
    """Raw media found under a folder (hidden folders skipped), and metadata files at its top."""

    videos: int
    images: int
    audio: int
    by_extension: dict[str, int]
    metadata_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunCheckpoint:
    """A resumable checkpoint: weights plus training state for the same step."""

    step: int
    weights: str
    training_state: str
    training_mode: Literal["lora", "full"]


@dataclass(frozen=True)
class PriorRunInfo:
    """A prior run's outputs: complete checkpoints highest step first, and incomplete ones."""

    checkpoints_dir: str | None
    checkpoints: tuple[RunCheckpoint, ...]
    weights_without_state: tuple[int, ...]
    state_without_weights: tuple[int, ...]
    has_training_config: bool


@dataclass(frozen=True)
class DatasetInfo:
    """What ``--dataset`` is. Exactly the parts that apply to ``kind`` are set."""

    kind: Kind
    path: str
    metadata: MetadataInfo | None = None
    media: MediaFolderInfo | None = None
    precomputed: PrecomputedInfo | None = None
    prior_run: PriorRunInfo | None = None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return plain_record(self)

    def to_finding(self) -> Finding:
        """The "Dataset" row of the findings table; warnings become the next step."""
        status: FindingStatus = "warning" if self.warnings else "ok"
        return Finding("Dataset", status, f"{self.kind}: {self._summary()}",
                       " ".join(self.warnings) if self.warnings else None)

    def _summary(self) -> str:
        if self.metadata is not None:
            meta = self.metadata
            media = ", ".join(col.column for col in meta.media_columns) or "none"
            missing = sum(col.missing for col in meta.media_columns)
            return (f"{self.path}: {meta.rows} rows, caption column {meta.caption_column or 'none'}, "
                    f"media columns {media}, {missing} media files missing")
        if self.prior_run is not None:
            latest = self.prior_run.checkpoints[0].step if self.prior_run.checkpoints else None
            return (f"{self.path}: {len(self.prior_run.checkpoints)} resumable checkpoint(s)"
                    + (f", latest step {latest}" if latest is not None else ""))
        if self.precomputed is not None:
            counts = ", ".join(f"{k} {v}" for k, v in self.precomputed.subfolders.items()) or "no subfolders"
            return f"{self.precomputed.path}: {counts}"
        assert self.media is not None  # videos_folder always carries media
        return (f"{self.path}: {self.media.videos} videos, {self.media.images} images, "
                f"{self.media.audio} audio files")
