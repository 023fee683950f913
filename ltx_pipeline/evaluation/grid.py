"""``outputs/eval/grid.png``: the same prompts and seeds rendered at each chosen checkpoint, one row per checkpoint.

Rows are checkpoints (labelled ``step N`` and, where it was measured, ``holdout <total>``), columns are prompts,
each prompt written under its column (wrapped, cut with "…"); a cell is the render's middle frame (a still image
as it is; an audio-only render says so). Whatever the footage, the number of prompts and of checkpoints, the grid
is at most 2000 px on its long side and under 5 MB (``reports.drawing``): prompts that fit in no column are left
off, and when the rows do not fit at a legible size an evenly spaced subset with the first and the last is shown
(``reports.contact_sheet.choose_steps``); the header says what was left off and that every render is listed in
``grid.json`` beside it. Every step, figure and prompt is in the PNG's text chunks too. Renders that do not decode
are shown as such and named in the returned list, never raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import AUDIO_SUFFIXES, IMAGE_SUFFIXES, BadMedia, read_frames
from ltx_pipeline.reports.contact_sheet import choose_steps
from ltx_pipeline.reports.drawing import MAX_SIDE, encode_sheet, font, line_height, thumbnail, wrap
from ltx_pipeline.workspace import atomic_write

__all__ = ["GridRow", "row_label", "write_grid"]

_MARGIN, _CELL_GAP, _ROW_GAP = 16, 12, 8
_MIN_THUMB = 160  # pixels wide: narrower columns, and the prompts under them, are not legible
_MIN_ROW = 64  # pixels high: lower rows leave checkpoints off instead
_PROMPT_LINES = 5
_TEXT_PX = 20

Picture = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class GridRow:
    """One checkpoint: its step, measured holdout total (None: not measured), and a render per prompt."""

    step: int
    holdout: float | None
    files: list[Path | None]


def row_label(row: GridRow) -> list[str]:
    """The words at the left of a row: ``step N`` and, when measured, ``holdout <total>``."""
    return [f"step {row.step}"] + ([f"holdout {row.holdout:.4g}"] if row.holdout is not None else [])


@dataclass(frozen=True)
class _Layout:
    thumb_w: int
    thumb_h: int
    columns: int  # prompts shown (the first ones)
    steps: list[int]  # rows shown
    label_w: int
    size: int

    @property
    def width(self) -> int:
        return 2 * _MARGIN + self.label_w + self.columns * (self.thumb_w + _CELL_GAP) - _CELL_GAP


def _layout(frame: tuple[int, int], prompts: int, steps: list[int], *, label_w: int) -> _Layout:
    """Thumbnails, columns and rows that fit ``MAX_SIDE`` (``frame`` is width, height)."""
    fw, fh = frame
    room = MAX_SIDE - 2 * _MARGIN - label_w
    columns = max(1, min(prompts, (room + _CELL_GAP) // (_MIN_THUMB + _CELL_GAP)))
    thumb_w = min(2 * fw, (room + _CELL_GAP) // columns - _CELL_GAP)  # small frames: at most twice their size
    thumb_h = max(1, round(thumb_w * fh / fw))
    natural = 2 * _MARGIN + label_w + columns * (thumb_w + _CELL_GAP)
    size = int(min(_TEXT_PX, max(13, natural / 70)))
    text_h = 2 * _MARGIN + 3 * line_height(font(size + 2)) + _PROMPT_LINES * line_height(font(size))
    height_room = MAX_SIDE - text_h - _MARGIN
    if len(steps) * (thumb_h + _ROW_GAP) > height_room:  # too tall: smaller thumbnails, then fewer rows
        thumb_h = max(_MIN_ROW, height_room // len(steps) - _ROW_GAP)
        thumb_w = min(thumb_w, max(1, round(thumb_h * fw / fh)))
    rows = max(1, min(len(steps), height_room // (thumb_h + _ROW_GAP)))
    return _Layout(thumb_w, thumb_h, columns, choose_steps(steps, rows), label_w, size)


def _middle(file: Path) -> Picture:
    """The middle frame of a video, or a still image.

    Raises:
        BadMedia: the file does not decode.
    """
    if file.suffix.lower() in IMAGE_SUFFIXES:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(file) as image:
                return np.asarray(image.convert("RGB"), dtype=np.uint8)
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            raise BadMedia(file, f"unreadable image ({exc})") from None
    frames = read_frames(file)
    middle: Picture = frames[len(frames) // 2].copy()
    return middle


def write_grid(rows: Sequence[GridRow], prompts: Sequence[str], path: Path, *,
               workspace: Path) -> tuple[Path | None, list[str]]:
    """Write the grid of ``rows`` x ``prompts`` to ``path``; returns (path, or None when nothing decoded; the
    names of the renders that did not decode)."""
    pictures: dict[Path, Picture | str] = {}
    unreadable: list[str] = []

    def picture(file: Path | None) -> Picture | str:
        if file is None:
            return "no render"
        if file.suffix.lower() in AUDIO_SUFFIXES:
            return "audio only"
        if file not in pictures:
            try:
                pictures[file] = _middle(file)
            except BadMedia:
                unreadable.append(file.name)
                pictures[file] = "not decodable"
        return pictures[file]

    first = next((p for row in rows for f in row.files if not isinstance(p := picture(f), str)), None)
    if first is None:
        return None, unreadable
    label_w = max(int(font(_TEXT_PX, bold=True).getlength(line)) for row in rows for line in row_label(row)) + 12
    layout = _layout((first.shape[1], first.shape[0]), len(prompts), [row.step for row in rows], label_w=label_w)
    shown = [row for row in rows if row.step in layout.steps]
    cells = [[picture(f) for f in row.files[: layout.columns]] for row in shown]
    sheet, text = _draw(shown, cells, layout, rows=rows, prompts=prompts)
    return atomic_write(path, encode_sheet(sheet, text), root=workspace), unreadable


def _notes(layout: _Layout, rows: Sequence[GridRow], prompts: Sequence[str]) -> str:
    words = "Same prompt and seed down each column; the middle frame of each render."
    if len(layout.steps) < len(rows):
        words += (f" {len(layout.steps)} of {len(rows)} checkpoints are shown (evenly spaced, the first and the "
                  "last among them).")
    if layout.columns < len(prompts):
        words += f" The first {layout.columns} of {len(prompts)} prompts are shown."
    return words + " Every render is listed in grid.json beside this grid."


def _draw(shown: list[GridRow], cells: list[list[Picture | str]], layout: _Layout, *, rows: Sequence[GridRow],
          prompts: Sequence[str]) -> tuple[Any, dict[str, str]]:
    """The grid as a PIL image, and its text chunks."""
    from PIL import Image, ImageDraw

    body, bold, title = font(layout.size), font(layout.size, bold=True), font(layout.size + 2, bold=True)
    notes = _notes(layout, rows, prompts)
    head = [("Checkpoints x prompts", title)]
    head += [(line, body) for line in wrap(notes, layout.width - 2 * _MARGIN, 3, body.getlength)]
    under = [wrap(" ".join(p.split()), layout.thumb_w, _PROMPT_LINES, body.getlength)
             for p in prompts[: layout.columns]]
    top = _MARGIN + sum(line_height(face) for _, face in head) + _MARGIN // 2
    row_h = max(layout.thumb_h, 2 * line_height(bold)) + _ROW_GAP
    footer = max(len(lines) for lines in under) * line_height(body)
    sheet = Image.new("RGB", (layout.width, top + len(shown) * row_h + footer + _MARGIN), "white")
    draw = ImageDraw.Draw(sheet)
    y = _MARGIN
    for line, face in head:
        draw.text((_MARGIN, y), line, fill="black", font=face)
        y += line_height(face)
    left = _MARGIN + layout.label_w
    for index, (row, pictures) in enumerate(zip(shown, cells, strict=True)):
        y = top + index * row_h
        for number, line in enumerate(row_label(row)):
            draw.text((_MARGIN, y + number * line_height(bold)), line, fill="black", font=bold)
        for column, cell in enumerate(pictures):
            x = left + column * (layout.thumb_w + _CELL_GAP)
            if isinstance(cell, str):
                draw.text((x, y + layout.thumb_h // 2), cell, fill="dimgray", font=body, anchor="lm")
                continue
            thumb = thumbnail(cell, layout.thumb_w, layout.thumb_h)
            sheet.paste(thumb, (x + (layout.thumb_w - thumb.width) // 2, y + (layout.thumb_h - thumb.height) // 2))
    y = top + len(shown) * row_h
    for column, lines in enumerate(under):
        for number, line in enumerate(lines):
            draw.text((left + column * (layout.thumb_w + _CELL_GAP), y + number * line_height(body)), line,
                      fill="black", font=body)
    text = {"Title": "Checkpoints x prompts", "Description": notes,
            "Rows": "\n".join(" ".join(row_label(row)) for row in shown),
            "Prompts": "\n".join(" ".join(p.split()) for p in prompts)}
    return sheet, text
