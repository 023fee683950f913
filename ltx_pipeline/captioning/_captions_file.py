"""The captions file every captioner reads and extends: the trainer's ``caption_videos.py`` JSON format.

The real script writes a JSON list of ``{"caption": ..., "media_path": ...}`` objects (``indent=2``,
``ensure_ascii=False``), each path relative to the output file's folder, and matches existing rows to clips by
resolving both to absolute paths. ``CaptionBook`` does the same, so a file written by the script, by the offline
captioner or by hand is read alike, and a clip outside the file's folder is refused up front (the script could
not write a relative path for it and would silently skip it). Items without those two string fields are kept
verbatim, and a file that is not a JSON list is an error: captions are never dropped silently.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ltx_pipeline.errors import BadDataset, BadInput
from ltx_pipeline.workspace import atomic_write

__all__ = ["CaptionBook", "strip_trigger"]

_PUNCT_SPACE = re.compile(r"\s+([,.;:!?])")
_REPEATED_PUNCT = re.compile(r"([,;:])(\s*[,;:])+")
_PAUSE_BEFORE_STOP = re.compile(r"[,;:]+\s*([.!?])")
_EMPTY_PAIR = re.compile(r"\(\s*\)|\[\s*\]|\"\s*\"")


def strip_trigger(text: str, trigger: str | None) -> str:
    """``text`` without ``trigger`` as a whole word (any case): the trainer prepends it itself at preprocessing,
    so a caption that already holds it would teach it twice (or teach it as ordinary description)."""
    if not trigger or not trigger.strip():
        return text
    word = re.compile(rf"(?<!\w){re.escape(trigger.strip())}(?!\w)", re.IGNORECASE)
    if not word.search(text):
        return text
    cleaned = _EMPTY_PAIR.sub(" ", word.sub(" ", text))
    cleaned = _PUNCT_SPACE.sub(r"\1", " ".join(cleaned.split()))
    cleaned = _PAUSE_BEFORE_STOP.sub(r"\1", _REPEATED_PUNCT.sub(r"\1", cleaned))
    return cleaned.strip(" ,;:")


class CaptionBook:
    """The rows of one captions file, indexed by each media file's resolved absolute path."""

    def __init__(self, path: Path, items: list[Any]) -> None:
        self.path = path
        self.base = path.parent.resolve()
        self._items = items
        self._index: dict[str, int] = {}
        for position, item in enumerate(items):
            if _is_row(item):
                self._index[str((self.base / item["media_path"]).resolve())] = position

    @classmethod
    def load(cls, path: Path) -> CaptionBook:
        """Read ``path`` (no file: no rows).

        Raises:
            BadDataset: the file is not a JSON list.
        """
        return cls(path, read_items(path))

    def key(self, clip: Path) -> str:
        """``clip``'s ``media_path``: relative to the file's folder, posix, the clip's own name kept (a symlinked
        clip keeps its staged name, as the real script does).

        Raises:
            BadInput: the clip is not inside the captions file's folder.
        """
        logical = clip.parent.resolve() / clip.name
        try:
            return logical.relative_to(self.base).as_posix()
        except ValueError:
            raise BadInput(f"The clip {clip} is not inside {self.base}, the captions file's folder", where=str(clip),
                           fix="stage the clips under the folder of the captions file (a symlink per clip is enough, "
                               "not a symlinked folder): the trainer's caption_videos.py writes paths relative to "
                               "it") from None

    def get(self, clip: Path) -> str | None:
        """The caption of ``clip``, or None when it has none yet."""
        position = self._index.get(str(clip.resolve()))
        return None if position is None else str(self._items[position]["caption"])

    def set(self, clip: Path, caption: str, media_path: str | None = None) -> None:
        """Give ``clip`` a caption: its row is updated in place, or a row is appended."""
        absolute = str(clip.resolve())
        position = self._index.get(absolute)
        if position is not None:
            self._items[position]["caption"] = caption
            return
        self._items.append({"caption": caption, "media_path": media_path or self.key(clip)})
        self._index[absolute] = len(self._items) - 1

    def rows(self) -> list[dict[str, str]]:
        """The ``{caption, media_path}`` rows only, as the real script would load them."""
        return [{"caption": item["caption"], "media_path": item["media_path"]} for item in self._items
                if _is_row(item)]

    def strip_trigger(self, clips: list[Path], trigger: str | None) -> bool:
        """Remove ``trigger`` from the captions of ``clips``; True when one changed."""
        changed = False
        for clip in clips:
            caption = self.get(clip)
            if caption is not None and (clean := strip_trigger(caption, trigger)) != caption:
                self.set(clip, clean)
                changed = True
        return changed

    def save(self, workspace: Path, path: Path | None = None) -> None:
        """Write every item (foreign ones too) atomically, in the real script's layout."""
        atomic_write(path or self.path, render(self._items), root=workspace)


def read_items(path: Path) -> list[Any]:
    """The JSON list in ``path`` ([] when it does not exist).

    Raises:
        BadDataset: unreadable, not JSON, or not a list.
    """
    fix = "repair the file, or move it away to caption every clip again"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise BadDataset(f"The captions file cannot be read ({exc})", where=str(path), fix=fix) from None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadDataset(f"The captions file is not valid JSON ({exc.msg} at line {exc.lineno})", where=str(path),
                         fix=fix) from None
    if not isinstance(items, list):
        raise BadDataset("The captions file is not a JSON list of {caption, media_path} rows", where=str(path),
                         fix=fix)
    return items


def render(items: list[Any]) -> str:
    """The text the real script writes for these items."""
    return json.dumps(items, indent=2, ensure_ascii=False)


def _is_row(item: Any) -> bool:
    return (isinstance(item, dict) and isinstance(item.get("caption"), str)
            and isinstance(item.get("media_path"), str))
