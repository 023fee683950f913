"""``outputs/eval/contact-sheet.png``: the first, middle and last frame of every evaluation render.

One row per render, in the order given: a label (``in distribution 01.mp4: <prompt>``, wrapped and cut to
at most four lines) above three panels (first | middle | last frame), so a user sees at a glance what
each prompt produced. A still image (``.png``) fills the first panel alone; audio files are skipped.
Reads the renders with PyAV (``ltx.media``) and draws with matplotlib's Agg canvas (a ``Figure`` of its
own, never pyplot, so no global state; imported inside the function, it is slow to import). Renders
that do not decode are left out and named in the returned list, never raised. The PNG is written
atomically inside the workspace.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import AUDIO_SUFFIXES, IMAGE_SUFFIXES, BadMedia, read_frames
from ltx_pipeline.workspace import atomic_write

__all__ = ["LABEL_MAX_LINES", "LABEL_WIDTH", "SheetEntry", "label_lines", "write_eval_sheet"]

LABEL_WIDTH = 125  # characters per label line: fits the sheet's width at the label's font size
LABEL_MAX_LINES = 4
_FONT_SIZE = 8  # points

# Geometry in inches: 9 wide at 80 dpi keeps an 11-row sheet well under 2 MB.
_WIDTH_IN = 9.0
_ROW_IN = 2.4
_HEADER_IN = 0.3
_MARGIN_IN = 0.1
_LABEL_IN = 0.6  # room above each row's panels for up to four label lines
_DPI = 80
_PANELS = 3

Picture = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class SheetEntry:
    """One render on the sheet: its prompt category (``in_distribution``), the file, the prompt."""

    category: str
    file: Path
    prompt: str


def label_lines(text: str, *, width: int = LABEL_WIDTH, max_lines: int = LABEL_MAX_LINES) -> list[str]:
    """``text`` wrapped to ``width`` characters, at most ``max_lines`` lines, the last ending in "…" when cut."""
    return textwrap.wrap(text, width=width, max_lines=max_lines, placeholder=" …") or [""]


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


def write_eval_sheet(entries: list[SheetEntry], path: Path, *, workspace: Path) -> tuple[Path | None, list[str]]:
    """Write the sheet for ``entries`` to ``path``; returns (path, or None when no entry decoded; unreadable names).

    Audio files (``.wav`` and the like) are skipped and not counted unreadable; a file that raises
    ``BadMedia`` is left out and its name returned.
    """
    rows: list[tuple[str, list[Picture]]] = []
    unreadable: list[str] = []
    for entry in entries:
        if entry.file.suffix.lower() in AUDIO_SUFFIXES:
            continue
        try:
            rows.append((_label(entry), _pictures(entry.file)))
        except BadMedia:
            unreadable.append(entry.file.name)
    if not rows:
        return None, unreadable

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height_in = _HEADER_IN + len(rows) * _ROW_IN + _MARGIN_IN
    figure = Figure(figsize=(_WIDTH_IN, height_in), dpi=_DPI, facecolor="white")
    FigureCanvasAgg(figure)
    panel_w = (_WIDTH_IN - 2 * _MARGIN_IN - (_PANELS - 1) * _MARGIN_IN) / _PANELS
    panel_h = _ROW_IN - _LABEL_IN - _MARGIN_IN
    figure.text(_MARGIN_IN / _WIDTH_IN, 1 - 0.05 / height_in, "first | middle | last frame of each render",
                ha="left", va="top", fontsize=_FONT_SIZE + 1, fontweight="bold", parse_math=False)
    for row, (label, pictures) in enumerate(rows):
        top_in = height_in - _HEADER_IN - row * _ROW_IN
        figure.text(_MARGIN_IN / _WIDTH_IN, top_in / height_in, "\n".join(label_lines(label)), ha="left", va="top",
                    fontsize=_FONT_SIZE, parse_math=False, wrap=False)
        bottom_in = top_in - _LABEL_IN - panel_h
        for column, picture in enumerate(pictures):
            left_in = _MARGIN_IN + column * (panel_w + _MARGIN_IN)
            axes = figure.add_axes((left_in / _WIDTH_IN, bottom_in / height_in, panel_w / _WIDTH_IN,
                                    panel_h / height_in))
            axes.imshow(picture, aspect="equal", interpolation="nearest")
            axes.set_axis_off()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, facecolor="white")
    return atomic_write(path, buffer.getvalue(), root=workspace), unreadable
