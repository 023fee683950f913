"""``samples/contact-sheet.png``: the validation samples at a bounded number of steps, one column per prompt.

Rows are validation steps: all of them when they fit, else at most ``MAX_ROWS`` evenly spaced ones that always
include the first (step 0: the base model's samples when initial validation ran) and the last. Columns are the
samples (sample k is rendered from the k-th validation prompt, written above its column, wrapped and cut with
"…"); each cell shows the sample's first, middle and last frame as thumbnails, or the middle frame alone when
three would be too small to see. The header says which steps are shown, out of how many, and that every sample
is beside the sheet (``step_<step>_<k>.mp4``). Whatever the footage and the run's length, the sheet is at most
2000 px on its long side and under 5 MB (``sheet_drawing``); its prompts and steps are in its text chunks too.
Only the shown steps' samples are decoded (PyAV, ``ltx.media``); those that do not decode are left out and
named in the returned list, never raised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import BadMedia, read_frames
from ltx_pipeline.reports.drawing import MAX_SIDE, encode_sheet, font, line_height, thumbnail, wrap
from ltx_pipeline.workspace import atomic_write

__all__ = ["MAX_ROWS", "SAMPLE_NAME", "choose_steps", "validation_prompts", "write_contact_sheet"]

SAMPLE_NAME = re.compile(r"step_(\d+)_(\d+)\.mp4$")
MAX_ROWS = 12  # validation steps on one sheet: enough to see the trend, few enough to see each frame
_PROMPT_LINES = 4
_MIN_THUMB = 128  # pixels wide: below this, a cell shows the middle frame alone
_MIN_ROW = 72  # pixels high: below this, fewer steps are shown
_MARGIN, _GAP, _CELL_GAP, _ROW_GAP = 16, 4, 18, 8
_TEXT_PX = 22  # the largest body text, on a full-width sheet

Picture = npt.NDArray[np.uint8]


def choose_steps(steps: Sequence[int], rows: int) -> list[int]:
    """At most ``rows`` of ``steps`` (sorted), evenly spaced by position, always the first and the last."""
    ordered = sorted(set(steps))
    if len(ordered) <= rows:
        return ordered
    if rows <= 1:
        return ordered[:1]
    picks = sorted({round(i * (len(ordered) - 1) / (rows - 1)) for i in range(rows)})
    return [ordered[i] for i in picks]


@dataclass(frozen=True)
class _Layout:
    frames: int  # per cell: 3 (first, middle, last) or 1 (middle)
    thumb_w: int
    thumb_h: int
    rows: int
    columns: int  # samples shown (the rest, if any, are named in the header)
    label_w: int
    size: int  # body font size in pixels

    @property
    def cell_w(self) -> int:
        return self.frames * self.thumb_w + (self.frames - 1) * _GAP

    @property
    def width(self) -> int:
        return 2 * _MARGIN + self.label_w + self.columns * self.cell_w + (self.columns - 1) * _CELL_GAP


def _layout(frame: tuple[int, int], samples: int, steps: int, *, label_w: int, header_h: int) -> _Layout:
    """Thumbnail size, frames per cell, rows and columns that fit ``MAX_SIDE`` (``frame`` is width, height)."""
    fw, fh = frame
    room = MAX_SIDE - 2 * _MARGIN - label_w
    columns = max(1, min(samples, (room + _CELL_GAP) // (_MIN_THUMB // 2 + _CELL_GAP)))
    per_cell = (room - (columns - 1) * _CELL_GAP) / columns
    frames = 3 if (per_cell - 2 * _GAP) / 3 >= _MIN_THUMB else 1
    thumb_w = min(2 * fw, int((per_cell - (frames - 1) * _GAP) / frames))  # small frames: at most twice their size
    thumb_h = max(1, round(thumb_w * fh / fw))
    height_room = MAX_SIDE - header_h - _MARGIN
    wanted = min(steps, MAX_ROWS)
    if wanted * (thumb_h + _ROW_GAP) > height_room:  # too tall (portrait footage): smaller thumbnails, then fewer rows
        thumb_h = max(_MIN_ROW, height_room // wanted - _ROW_GAP)
        thumb_w = max(1, round(thumb_h * fw / fh))
    rows = max(1, min(wanted, height_room // (thumb_h + _ROW_GAP)))
    natural = 2 * _MARGIN + label_w + columns * (frames * thumb_w + (frames - 1) * _GAP) + (columns - 1) * _CELL_GAP
    size = int(min(_TEXT_PX, max(14, natural / 90)))  # text in proportion to the sheet
    return _Layout(frames, thumb_w, thumb_h, rows, columns, label_w, size)


def _find(samples_dir: Path) -> dict[int, dict[int, Path]]:
    found: dict[int, dict[int, Path]] = {}
    for sample in samples_dir.glob("step_*.mp4") if samples_dir.is_dir() else []:
        match = SAMPLE_NAME.match(sample.name)
        if match:
            found.setdefault(int(match[1]), {})[int(match[2])] = sample
    return found


def _picks(file: Path) -> list[Picture]:
    frames = read_frames(file)
    return [frames[0].copy(), frames[len(frames) // 2].copy(), frames[-1].copy()]


class _Decoded:
    """The samples decoded so far (each at most once), and the names that would not decode."""

    def __init__(self, found: dict[int, dict[int, Path]]) -> None:
        self.found = found
        self.pictures: dict[tuple[int, int], list[Picture]] = {}
        self.unreadable: list[str] = []

    def step(self, step: int) -> dict[int, list[Picture]]:
        out = {}
        for k, file in sorted(self.found[step].items()):
            if (step, k) not in self.pictures and file.name not in self.unreadable:
                try:
                    self.pictures[(step, k)] = _picks(file)
                except BadMedia:
                    self.unreadable.append(file.name)
            if (step, k) in self.pictures:
                out[k] = self.pictures[(step, k)]
        return out


def write_contact_sheet(samples_dir: Path, path: Path, *, workspace: Path,
                        prompts: Sequence[str] = ()) -> tuple[Path | None, list[str]]:
    """Write the sheet for the mp4 samples in ``samples_dir``; returns (path or None, unreadable names).

    Args:
        prompts: the validation prompts in order (sample k was rendered from ``prompts[k - 1]``).
    """
    found = _find(samples_dir)
    decoded = _Decoded(found)
    steps = sorted(found)
    first = next((pics for s in steps if (pics := decoded.step(s))), None)
    if first is None:
        return None, decoded.unreadable
    picture = next(iter(first.values()))[0]
    samples = sorted({k for by_k in found.values() for k in by_k})
    label_w = int(font(_TEXT_PX, bold=True).getlength(f"step {steps[-1]}")) + 12
    header_h = 2 * _MARGIN + line_height(font(_TEXT_PX + 4)) + (3 + _PROMPT_LINES) * line_height(font(_TEXT_PX))
    layout = _layout((picture.shape[1], picture.shape[0]), len(samples), len(steps), label_w=label_w,
                     header_h=header_h)
    rows = [(s, pics) for s in choose_steps(steps, layout.rows) if (pics := decoded.step(s))]
    sheet, text = _draw(rows, layout, steps=steps, samples=samples, prompts=prompts, folder=samples_dir.name,
                        missing={(s, k): f.name in decoded.unreadable for s, by_k in found.items()
                                 for k, f in by_k.items()})
    return atomic_write(path, encode_sheet(sheet, text), root=workspace), decoded.unreadable


def validation_prompts(config: Mapping[str, Any]) -> list[str]:
    """The prompts a trainer config's validation renders, in order (sample k is prompt k): each of
    ``validation.samples``' ``prompt``, else ``validation.prompts``."""
    validation = config.get("validation")
    if not isinstance(validation, Mapping):
        return []
    samples = validation.get("samples") or []
    if samples:
        return [str(s.get("prompt") or "") if isinstance(s, Mapping) else str(s) for s in samples]
    return [str(p) for p in validation.get("prompts") or []]


def _prompt(prompts: Sequence[str], k: int) -> str:
    return " ".join(prompts[k - 1].split()) if 0 < k <= len(prompts) else ""


def _steps_words(shown: list[int], steps: list[int], folder: str) -> str:
    listed = ", ".join(str(s) for s in shown)
    if len(shown) == len(steps):
        return (f"All {len(steps)} validation steps: {listed}. Each sample is beside this sheet as "
                f"{folder}/step_<step>_<k>.mp4.")
    return (f"{len(shown)} of {len(steps)} validation steps, evenly spaced from the first to the last: {listed}. "
            f"Every step's samples are beside this sheet as {folder}/step_<step>_<k>.mp4 (and on the dashboard).")


def _draw(rows: list[tuple[int, dict[int, list[Picture]]]], layout: _Layout, *, steps: list[int],
          samples: list[int], prompts: Sequence[str], folder: str,
          missing: dict[tuple[int, int], bool]) -> tuple[Any, dict[str, str]]:
    """The sheet as a PIL image, and its text chunks (title, what is shown, every prompt in full)."""
    from PIL import Image, ImageDraw

    body, bold, title = font(layout.size), font(layout.size, bold=True), font(layout.size + 4, bold=True)
    shown = samples[: layout.columns]
    what = "first | middle | last frame of each sample" if layout.frames == 3 else "middle frame of each sample"
    notes = _steps_words([step for step, _ in rows], steps, folder)
    if len(samples) > len(shown):
        notes += f" Samples {shown[-1] + 1} to {samples[-1]} are not shown: more than fit on one sheet."
    head = [(f"Validation samples by step: {what}", title)]
    head += [(line, body) for line in wrap(notes, layout.width - 2 * _MARGIN, 3, body.getlength)]
    columns = [wrap(f"sample {k}: {_prompt(prompts, k)}" if _prompt(prompts, k) else f"sample {k}", layout.cell_w,
                    _PROMPT_LINES, body.getlength) for k in shown]
    top = _MARGIN + sum(line_height(face) for _, face in head) + _MARGIN // 2
    header_h = top + max(len(c) for c in columns) * line_height(body) + _ROW_GAP
    sheet = Image.new("RGB", (layout.width, header_h + len(rows) * (layout.thumb_h + _ROW_GAP) + _MARGIN), "white")
    draw = ImageDraw.Draw(sheet)
    y = _MARGIN
    for line, face in head:
        draw.text((_MARGIN, y), line, fill="black", font=face)
        y += line_height(face)
    left = _MARGIN + layout.label_w
    for index, lines in enumerate(columns):
        for number, line in enumerate(lines):
            draw.text((left + index * (layout.cell_w + _CELL_GAP), top + number * line_height(body)), line,
                      fill="black", font=body)
    y = header_h
    for step, by_k in rows:
        draw.text((_MARGIN, y + layout.thumb_h // 2), f"step {step}", fill="black", font=bold, anchor="lm")
        for index, k in enumerate(shown):
            x = left + index * (layout.cell_w + _CELL_GAP)
            if k not in by_k:
                words = "not decodable" if missing.get((step, k)) else "no sample"
                draw.text((x, y + layout.thumb_h // 2), words, fill="dimgray", font=body, anchor="lm")
                continue
            for number, picture in enumerate(by_k[k] if layout.frames == 3 else by_k[k][1:2]):
                thumb = thumbnail(picture, layout.thumb_w, layout.thumb_h)
                sheet.paste(thumb, (x + number * (layout.thumb_w + _GAP) + (layout.thumb_w - thumb.width) // 2,
                                    y + (layout.thumb_h - thumb.height) // 2))
        y += layout.thumb_h + _ROW_GAP
    text = {"Title": f"Validation samples by step: {what}", "Description": notes,
            "Steps": ", ".join(str(step) for step, _ in rows),
            "Prompts": "\n".join(f"sample {k}: {_prompt(prompts, k)}" for k in samples)}
    return sheet, text
