"""``outputs/eval/contact-sheet.png``: the first, middle and last frame of every evaluation render.

One cell per render, in the order given: a label (``in distribution 01.mp4: <prompt>``, wrapped to the cell and
cut with "…" after four lines) above three thumbnails (first | middle | last frame), so a user sees at a glance
what each prompt produced. Cells fill one column while the sheet fits, else two to four; renders that fit in no
layout (dozens of prompts) are left off and the header says how many and that every render and prompt is in
``prompts.json`` beside it. Whatever the renders' size and number, the sheet is at most 2000 px on its long side
and under 5 MB (``sheet_drawing``), its prompts in its text chunks too. A still image (``.png``) fills the first
thumbnail alone; audio files are skipped. Reads the renders with PyAV (``ltx.media``); renders that do not decode
are left out and named in the returned list, never raised. The PNG is written atomically inside the workspace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import AUDIO_SUFFIXES, IMAGE_SUFFIXES, BadMedia, read_frames
from ltx_pipeline.reports.drawing import MAX_SIDE, encode_sheet, font, line_height, thumbnail, wrap
from ltx_pipeline.workspace import atomic_write

__all__ = ["LABEL_MAX_LINES", "LABEL_WIDTH", "SheetEntry", "label_lines", "write_eval_sheet"]

LABEL_WIDTH = 125  # characters per label line, for ``label_lines`` used as plain text
LABEL_MAX_LINES = 4
_MARGIN, _GAP, _CELL_GAP, _ROW_GAP = 16, 4, 24, 14
_MAX_COLUMNS = 4
_MIN_THUMB = 96  # pixels wide: smaller thumbnails leave renders off the sheet instead
_TEXT_PX = 20

Picture = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class SheetEntry:
    """One render on the sheet: its prompt category (``in_distribution``), the file, the prompt."""

    category: str
    file: Path
    prompt: str


def label_lines(text: str, *, width: float = LABEL_WIDTH, max_lines: int = LABEL_MAX_LINES,
                measure: Callable[[str], float] = len) -> list[str]:
    """``text`` wrapped to ``width`` (characters, or pixels with a font's ``getlength`` as ``measure``), at most
    ``max_lines`` lines, the last ending in "…" when cut."""
    return wrap(text, width, max_lines, measure)


def _label(entry: SheetEntry) -> str:
    head = f"{entry.category.replace('_', ' ')} {entry.file.name}".strip()
    prompt = " ".join(entry.prompt.split())
    return f"{head}: {prompt}" if prompt else head


def _pictures(file: Path) -> list[Picture]:
    """The panels of one file: first, middle and last frame of a video, or a still image once.

    Raises:
        BadMedia: the file does not decode.
    """
    if file.suffix.lower() in IMAGE_SUFFIXES:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(file) as image:
                return [np.asarray(image.convert("RGB"), dtype=np.uint8)]
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            raise BadMedia(file, f"unreadable image ({exc})") from None
    frames = read_frames(file)
    return [frames[0].copy(), frames[len(frames) // 2].copy(), frames[-1].copy()]


@dataclass(frozen=True)
class _Layout:
    columns: int
    thumb_w: int
    thumb_h: int
    shown: int  # renders on the sheet (the first ones); the rest are named in the header
    size: int  # text size in pixels

    @property
    def cell_w(self) -> int:
        return 3 * self.thumb_w + 2 * _GAP

    @property
    def width(self) -> int:
        return 2 * _MARGIN + self.columns * self.cell_w + (self.columns - 1) * _CELL_GAP


def _layout(frame: tuple[int, int], count: int) -> _Layout:
    """The fewest columns whose grid of ``count`` cells fits ``MAX_SIDE`` with thumbnails at least ``_MIN_THUMB``
    wide; when none does, the widest such grid and as many renders as fit (``frame`` is width, height)."""
    fw, fh = frame
    label_h = LABEL_MAX_LINES * line_height(font(_TEXT_PX))
    room = MAX_SIDE - _header_h() - _MARGIN
    best = _Layout(1, 1, 1, 1, _TEXT_PX)
    for columns in range(1, _MAX_COLUMNS + 1):
        cell_w = (MAX_SIDE - 2 * _MARGIN - (columns - 1) * _CELL_GAP) / columns
        thumb_w = int(min(2 * fw, (cell_w - 2 * _GAP) / 3))  # small frames: at most twice their size
        if columns > 1 and thumb_w < _MIN_THUMB:
            break
        thumb_h = max(1, round(thumb_w * fh / fw))
        fit = columns * max(1, room // (label_h + thumb_h + _ROW_GAP))
        width = 2 * _MARGIN + columns * (3 * thumb_w + 2 * _GAP) + (columns - 1) * _CELL_GAP
        size = int(min(_TEXT_PX, max(13, width / 60)))  # text in proportion to the sheet
        best = _Layout(columns, thumb_w, thumb_h, min(count, fit), size)
        if fit >= count:
            break
    return best


def _header_h() -> int:
    return 2 * _MARGIN + line_height(font(_TEXT_PX + 2, bold=True)) + 2 * line_height(font(_TEXT_PX))


def write_eval_sheet(entries: list[SheetEntry], path: Path, *, workspace: Path) -> tuple[Path | None, list[str]]:
    """Write the sheet for ``entries`` to ``path``; returns (path, or None when no entry decoded; unreadable names).

    Audio files (``.wav`` and the like) are skipped and not counted unreadable; a file that raises
    ``BadMedia`` is left out and its name returned. Only the renders the sheet shows are decoded.
    """
    rows: list[tuple[str, list[Picture]]] = []
    unreadable: list[str] = []
    visual = [e for e in entries if e.file.suffix.lower() not in AUDIO_SUFFIXES]
    layout: _Layout | None = None
    for entry in visual:
        if layout is not None and len(rows) >= layout.shown:
            break
        try:
            rows.append((_label(entry), _pictures(entry.file)))
        except BadMedia:
            unreadable.append(entry.file.name)
            continue
        if layout is None:  # the first render's frame sets the thumbnails' shape
            layout = _layout((rows[0][1][0].shape[1], rows[0][1][0].shape[0]), len(visual))
    if not rows or layout is None:
        return None, unreadable
    sheet, text = _draw(rows, layout, total=len(visual) - len(unreadable), labels=[_label(e) for e in visual])
    return atomic_write(path, encode_sheet(sheet, text), root=workspace), unreadable


def _draw(rows: list[tuple[str, list[Picture]]], layout: _Layout, *, total: int,
          labels: list[str]) -> tuple[Any, dict[str, str]]:
    """The sheet as a PIL image, and its text chunks (every render's label and prompt in full)."""
    from PIL import Image, ImageDraw

    body, title = font(layout.size), font(layout.size + 2, bold=True)
    notes = "first | middle | last frame of each render"
    if len(rows) < total:
        notes += (f"; the first {len(rows)} of {total} renders are shown (more than fit on one sheet): every render "
                  "and its prompt are listed in prompts.json beside this sheet")
    head = [("Evaluation renders", title)]
    head += [(line, body) for line in wrap(notes, layout.width - 2 * _MARGIN, 2, body.getlength)]
    cells = [(wrap(label, layout.cell_w, LABEL_MAX_LINES, body.getlength), pictures) for label, pictures in rows]
    grid = [cells[i:i + layout.columns] for i in range(0, len(cells), layout.columns)]
    heights = [max(len(lines) for lines, _ in row) * line_height(body) + layout.thumb_h + _ROW_GAP for row in grid]
    top = _MARGIN + sum(line_height(face) for _, face in head) + _MARGIN // 2
    sheet = Image.new("RGB", (layout.width, top + sum(heights) + _MARGIN), "white")
    draw = ImageDraw.Draw(sheet)
    y = _MARGIN
    for line, face in head:
        draw.text((_MARGIN, y), line, fill="black", font=face)
        y += line_height(face)
    y = top
    for row, height in zip(grid, heights, strict=True):
        label_h = height - layout.thumb_h - _ROW_GAP
        for column, (lines, pictures) in enumerate(row):
            x = _MARGIN + column * (layout.cell_w + _CELL_GAP)
            for number, line in enumerate(lines):
                draw.text((x, y + number * line_height(body)), line, fill="black", font=body)
            for number, picture in enumerate(pictures):
                thumb = thumbnail(picture, layout.thumb_w, layout.thumb_h)
                sheet.paste(thumb, (x + number * (layout.thumb_w + _GAP) + (layout.thumb_w - thumb.width) // 2,
                                    y + label_h + (layout.thumb_h - thumb.height) // 2))
        y += height
    text = {"Title": "Evaluation renders: first | middle | last frame of each", "Description": notes,
            "Prompts": "\n".join(labels)}
    return sheet, text
