"""The paths a trainer config names: refused, all at once, when they are placeholders, missing or unreadable.

Owns ``path_checks`` (one finding per unusable path, each naming its key with indices, e.g.
``validation.samples[0].conditions[0].image_or_video``, its value and the fix) and
``unusable_paths_error`` (the one ``BadConfig`` a command raises for them). Two rules:

- every string anywhere in the config that holds the templates' placeholder (``/path/to/``, or a
  relative ``path/to/`` at its start) is refused, whatever the key;
- every key the trainer reads a file or folder from must name one that exists and can be read:
  ``model.model_path``, ``model.text_encoder_path``, ``model.video_vae_path``, ``model.audio_vae_path``,
  ``model.load_checkpoint``, ``data.preprocessed_data_root``, each validation sample condition's
  ``image_or_video``, ``video``, ``audio`` and ``mask``, and the legacy ``validation.images`` and
  ``validation.reference_videos``. Paths resolve as the trainer resolves them: a relative path against
  the directory it runs in (``cwd``), ``~`` expanded only in ``data.preprocessed_data_root``.

A key the pipeline itself fills later (the preprocessed folder before preprocessing ran, a chained
stage's warm start) may be excused while missing (``written_later``); a placeholder never is. The
trainer checks only some of these paths itself, and the validation media only when its validation
runner opens them, after preprocessing and model loading (facts §5): this check refuses them before
anything heavy runs. It reads the filesystem (stat and access) and never writes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ltx_pipeline.errors import BadConfig
from ltx_pipeline.ltx.data_check import Check

__all__ = ["PLACEHOLDER", "path_checks", "unusable_paths_error"]

#: What the trainer's templates write where a real path belongs (``/path/to/conditioning_image_1.png``).
PLACEHOLDER = "/path/to/"
_DATA_ROOT = "data.preprocessed_data_root"

_Kind = Literal["file", "folder", "file or folder"]
_MODEL_KEYS: dict[str, _Kind] = {"model_path": "file or folder", "text_encoder_path": "file or folder",
                                 "video_vae_path": "file", "audio_vae_path": "file",
                                 "load_checkpoint": "file or folder"}
_CONDITION_MEDIA = ("image_or_video", "video", "audio", "mask")
_LEGACY_MEDIA = ("images", "reference_videos")
_FIXES = {
    "path-placeholder": "replace the template's placeholder with the real path",
    "path-missing": "name an existing {kind} there",
    "path-unreadable": "let this user read it (chmod a+r; a+x on folders)",
    "path-not-a-file": "name a file there, not a folder",
    "path-not-a-folder": "name a folder there, not a file",
}


def path_checks(config: Mapping[str, Any], *, cwd: Path | None = None, existence: bool = True,
                written_later: Collection[str] = ()) -> list[Check]:
    """Every placeholder, missing or unreadable path in a trainer config, in the config's order.

    Args:
        config: the trainer config mapping as ``yaml.safe_load`` reads it; malformed sections are
            skipped (the schema validator reports them).
        cwd: the directory the trainer will run in, where relative paths resolve; None means the
            process working directory.
        existence: False checks placeholders only (a backend whose trainer reads no files).
        written_later: dotted keys (``data.preprocessed_data_root``, ``model.load_checkpoint``) whose
            path the pipeline writes before the launch: their absence is excused, a placeholder is not.

    Returns:
        One error ``Check`` per unusable path; ``path`` is the key with indices, the message names
        the value (and, for a relative one, where it was looked for).
    """
    checks = []
    for key, value, kind in _strings(config, ()):
        if _is_placeholder(value):
            checks.append(_check("path-placeholder", key, value, "is a template placeholder, not a real path",
                                 kind or "file or folder"))
        elif kind is not None and existence:
            problem = _problem(key, value, kind, cwd, excused=key in written_later)
            if problem is not None:
                code, words = problem
                checks.append(_check(code, key, value, words, kind))
    return checks


def unusable_paths_error(checks: Sequence[Check], where: str) -> BadConfig:
    """The one error for every finding of ``path_checks``: each key and value, then each distinct fix.

    Args:
        checks: the findings (at least one).
        where: the config file (or run) they were found in.

    Returns:
        A ``BadConfig`` (exit 2) whose ``errors`` pair each key with its message.
    """
    count = len(checks)
    listed = "; ".join(c.message for c in checks)
    fixes = "; ".join(dict.fromkeys(c.fix for c in checks if c.fix))
    return BadConfig(f"The trainer config names {count} unusable path{'s' if count != 1 else ''}: {listed}",
                     where=where, fix=fixes, errors=[(c.path or "", c.message) for c in checks])


def _strings(node: Any, parts: tuple[str | int, ...]) -> Iterator[tuple[str, str, _Kind | None]]:
    """Each string value under ``node``: its key with indices, the value, and the kind of path it names."""
    if isinstance(node, Mapping):
        for name, child in node.items():
            yield from _strings(child, (*parts, str(name)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _strings(child, (*parts, index))
    elif isinstance(node, str):
        yield _key(parts), node, _path_kind(parts)


def _key(parts: tuple[str | int, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _path_kind(parts: tuple[str | int, ...]) -> _Kind | None:
    """What the trainer reads at this key: a file, a folder, either; None for a key that names no input."""
    match parts:
        case ("model", str(name)) if name in _MODEL_KEYS:
            return _MODEL_KEYS[name]
        case ("data", "preprocessed_data_root"):
            return "folder"
        case ("validation", "samples", int(), "conditions", int(), str(name)) if name in _CONDITION_MEDIA:
            return "file"
        case ("validation", str(name), int()) if name in _LEGACY_MEDIA:
            return "file"
    return None


def _is_placeholder(value: str) -> bool:
    return PLACEHOLDER in value or value.lstrip().startswith(PLACEHOLDER.lstrip("/"))


def _problem(key: str, value: str, kind: _Kind, cwd: Path | None,
             excused: bool) -> tuple[str, str] | None:
    """``(code, words)`` for a path that cannot be used as ``kind``; None when it can (or is excused)."""
    if not value.strip():  # an empty load_checkpoint is no checkpoint to the trainer; anywhere else, no path
        return None if key == "model.load_checkpoint" else ("path-missing", "is empty")
    # The trainer expands ``~`` only in the data root (facts §1.8); every other path is taken as written.
    path = Path(value).expanduser() if key == _DATA_ROOT else Path(value)
    located = path if path.is_absolute() else (cwd or Path.cwd()) / path
    seen = "" if path.is_absolute() else f" (relative, looked for at {located})"
    try:
        is_folder = stat.S_ISDIR(located.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError):
        if excused:
            return None
        tilde = " (the trainer does not expand ~ here)" if value.startswith("~") and key != _DATA_ROOT else ""
        return "path-missing", f"does not exist{seen}{tilde}"
    except OSError as error:  # e.g. a folder on the way that this user cannot enter
        return "path-unreadable", f"cannot be reached{seen}: {error.strerror or error}"
    if kind == "file" and is_folder:
        return "path-not-a-file", f"is a folder{seen}"
    if kind == "folder" and not is_folder:
        return "path-not-a-folder", f"is a file{seen}"
    if not os.access(located, os.R_OK | (os.X_OK if is_folder else 0)):
        return "path-unreadable", f"cannot be read by this user{seen}"
    return None


def _check(code: str, key: str, value: str, words: str, kind: _Kind) -> Check:
    return Check("error", code, f"{key} = {value!r} {words}", key, _FIXES[code].format(kind=kind))
