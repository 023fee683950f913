"""Which ``.precomputed/`` files the trainer's preprocessing writes for one metadata row, and which script writes each.

The trainer's ``process_dataset.py`` reads the metadata's columns as roles (its convention table,
process_dataset.py:7-15: ``video`` -> ``latents/``, ``audio`` -> ``audio_latents/``, ``reference_video`` ->
``reference_latents/``, ``reference_audio`` -> ``reference_audio_latents/``, ``video_mask`` -> ``video_masks/``,
``audio_mask`` -> ``audio_masks/``, ``caption`` -> ``conditions/``; legacy ``media_path`` and ``ref_media_path``)
and names every output after a row's main media (``sample_name``). Two of its parts also ship as scripts of
their own: ``process_videos.py`` writes ``latents/`` and the sound of those videos into ``audio_latents/``,
``process_captions.py`` writes ``conditions/``; everything else (audio files, references, masks) only
``process_dataset.py`` writes. So a caller that knows which of a row's files are missing knows which script
makes them (``script_for``). Pure: path arithmetic only, nothing is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.errors import BadDataset
from ltx_pipeline.ltx.metadata import sample_name
from ltx_pipeline.ltx.modes import COLUMN_ALIASES, Mode

__all__ = ["ROLE_FOLDERS", "SCRIPT_FOLDERS", "PlannedOutput", "PreprocessScript", "dataset_roles", "naming_column",
           "row_outputs", "script_for"]

#: ``process_dataset.py`` (everything), ``process_videos.py`` (video latents and their sound) or
#: ``process_captions.py`` (text conditions).
PreprocessScript = Literal["dataset", "videos", "captions"]

#: Each role's subfolder (process_dataset.py:7-15), in the order the script writes them.
ROLE_FOLDERS: dict[str, str] = {"caption": "conditions", "video": "latents", "reference_video": "reference_latents",
                                "video_mask": "video_masks", "audio": "audio_latents",
                                "reference_audio": "reference_audio_latents", "audio_mask": "audio_masks"}
#: The subfolders each script writes under a ``.precomputed`` root (the split scripts take them as their
#: ``--output-dir`` and ``--audio-output-dir``).
SCRIPT_FOLDERS: dict[PreprocessScript, tuple[str, ...]] = {
    "dataset": tuple(ROLE_FOLDERS.values()), "videos": ("latents", "audio_latents"), "captions": ("conditions",)}
_LEGACY = {alias: role for role, names in COLUMN_ALIASES.items() for alias in names if alias != role}


@dataclass(frozen=True)
class PlannedOutput:
    """One file preprocessing writes for a row.

    Attributes:
        role: the metadata role it encodes (``caption``, ``video``, ``audio``, ``reference_video``, ...);
            ``audio`` also for the sound extracted from a ``video``.
        folder: its subfolder of the ``.precomputed`` root (``conditions``, ``latents``, ...).
        name: its POSIX path in that folder (``videos/a.pt``).
        script: the narrowest script that writes it; ``dataset`` when no split script can.
        trained: whether the mode's training reads that folder (else preprocessing writes it all the same).
    """

    role: str
    folder: str
    name: str
    script: PreprocessScript
    trained: bool

    @property
    def path(self) -> str:
        """``folder/name``, relative to the ``.precomputed`` root."""
        return f"{self.folder}/{self.name}"


def dataset_roles(columns: Iterable[str], *, video_column: str | None = None,
                  caption_column: str | None = None) -> dict[str, str]:
    """Role -> column, as ``process_dataset._resolve_columns`` maps them (process_dataset.py:292-311).

    Args:
        columns: the metadata's columns (the trainer reads them from the first row, or the CSV header).
        video_column: ``--video-column``: that column is the video, when the metadata has it.
        caption_column: ``--caption-column``: likewise for the caption.
    """
    present = list(columns)
    roles: dict[str, str] = {}
    for column in present:
        role = _LEGACY.get(column, column)
        if role in ROLE_FOLDERS:
            roles[role] = column
    for role, override in (("video", video_column), ("caption", caption_column)):
        if override and override in present:
            roles[role] = override
    return roles


def naming_column(role: str, roles: Mapping[str, str]) -> str:
    """The column a role's output file is named after (its ``main_media_column`` in process_dataset.py).

    Captions are named after the video, else the audio, else the caption itself (process_dataset.py:129);
    video latents, references and video masks after the video (:150, :190, :210); audio and reference audio
    after the video when there is one, else their own file (:238; process_videos.py:1122); audio masks after
    the video, else the audio (:254).
    """
    order: tuple[str, ...] = ("video",)
    if role == "caption":
        order = ("video", "audio", "caption")
    elif role in ("audio", "reference_audio"):
        order = ("video", role)
    elif role == "audio_mask":
        order = ("video", "audio")
    return next(roles[name] for name in order if name in roles)


def row_outputs(mode: Mode, row: Mapping[str, Any], base: Path, *, extract_audio: bool,
                roles: Mapping[str, str] | None = None) -> tuple[PlannedOutput, ...]:
    """The files ``process_dataset.py`` writes for one row, each with the narrowest script that writes it.

    Args:
        mode: the training mode; it only says which folders training reads (``PlannedOutput.trained``).
        row: one metadata row.
        base: the metadata file's folder (names are relative to it, as ``sample_name`` makes them).
        extract_audio: the sound of the row's video is encoded: ``--skip-audio`` is not given and the clip
            has an audio track (one without gets no audio latents, process_videos.py:578-607). Ignored
            when the metadata has an ``audio`` column: then that file is encoded instead (process_dataset.py:141).
        roles: role -> column (``dataset_roles``); default the row's own columns.

    Raises:
        BadDataset: the row lacks a value its roles need, or its metadata has no caption or no media column.
    """
    roles = dict(roles) if roles is not None else dataset_roles(row)
    if "caption" not in roles or not {"video", "audio"} & set(roles):
        raise BadDataset(f"Metadata columns {sorted(row)} lack a caption or a video/audio column",
                         where="metadata", fix="name the columns `caption` and `video` (or `audio`)")
    wanted = [role for role in ROLE_FOLDERS if role in roles and _written(role, roles)]
    if "video" in roles and "audio" not in roles and extract_audio:
        wanted.insert(wanted.index("video") + 1, "audio")  # the video's own sound (process_dataset.py:141-160)
    outputs = []
    for role in wanted:
        column = naming_column(role, roles)
        value = row.get(column)
        if not isinstance(value, str) or not value.strip():
            raise BadDataset(f"A metadata row has no {column!r} value: {dict(row)}", where="metadata",
                             fix=f"give every row a {column!r}")
        folder = ROLE_FOLDERS[role]
        outputs.append(PlannedOutput(role, folder, sample_name(base, value), _script(role, roles),
                                     folder in mode.precomputed_dirs))
    return tuple(outputs)


def _written(role: str, roles: Mapping[str, str]) -> bool:
    """Whether process_dataset.py writes that role at all: references and video masks only beside a video."""
    return role not in ("reference_video", "video_mask") or "video" in roles


def _script(role: str, roles: Mapping[str, str]) -> PreprocessScript:
    if role == "caption":
        return "captions"
    if role == "video" or (role == "audio" and "audio" not in roles):  # a video's sound: `--with-audio`
        return "videos"
    return "dataset"


def script_for(missing: Iterable[PlannedOutput]) -> PreprocessScript | None:
    """The one script that writes every missing output: a split script when they are all its, else ``dataset``.

    Returns:
        None when nothing is missing.
    """
    scripts = {output.script for output in missing}
    if not scripts:
        return None
    return scripts.pop() if len(scripts) == 1 else "dataset"
