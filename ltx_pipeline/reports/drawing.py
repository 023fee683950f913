"""What the contact sheets share: a scalable font, text wrapped to a width, thumbnails, and a bounded PNG.

Invariant: ``encode_sheet`` returns a PNG at most ``MAX_SIDE`` pixels on its long side and at most ``MAX_BYTES``
bytes, whatever the footage. Real frames compress badly as PNG (four 960x544 clips over 2000 steps made a 90 MB
sheet), so it falls back to a 256-colour palette, then to a smaller scale, until the file fits. The sheet's words
also go into the PNG's text chunks, so a program (and a test) reads the prompts a person reads.
The font is the DejaVu Sans that matplotlib (a dependency) ships, so text is drawn at a size chosen for the
sheet, never PIL's fixed 10-pixel bitmap font.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_BYTES", "MAX_SIDE", "encode_sheet", "font", "line_height", "thumbnail", "wrap"]

MAX_SIDE = 2000  # pixels, the long side of every sheet
MAX_BYTES = 4_800_000  # under the 5 MB every sheet promises, with room for the text chunks
_ELLIPSIS = " …"


def font(size: int, *, bold: bool = False) -> Any:
    """DejaVu Sans at ``size`` pixels (matplotlib's copy); PIL's default font where that file is missing."""
    from PIL import ImageFont

    try:
        import matplotlib

        name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
        return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name), size)
    except (ImportError, OSError):
        try:
            return ImageFont.load_default(size=size)  # Pillow >= 10.1 scales its own font
        except TypeError:
            return ImageFont.load_default()


def line_height(face: Any) -> int:
    """Pixels from one line's top to the next's."""
    ascent, descent = face.getmetrics()
    return int((ascent + descent) * 1.15) + 1


def wrap(text: str, width: float, max_lines: int, measure: Callable[[str], float] = len) -> list[str]:
    """``text`` in lines no wider than ``width`` (by ``measure``: characters, or a font's pixels), at most
    ``max_lines``; the last line ends in "…" when the text was cut. A word wider than a line is cut too."""
    words = text.split()
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if measure(candidate) <= width:
            current = candidate
            continue
        if current:
            lines.append(current)
        current = word
        while measure(current) > width and len(current) > 1:  # a word wider than the line: cut it
            cut = _longest_prefix(current, width, measure)
            lines.append(current[:cut])
            current = current[cut:]
    if current:
        lines.append(current)
    if len(lines) <= max_lines:
        return lines or [""]
    kept = lines[:max_lines]
    last = kept[-1]
    while last and measure(last + _ELLIPSIS) > width:
        last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
    kept[-1] = (last + _ELLIPSIS).strip()
    return kept


def _longest_prefix(word: str, width: float, measure: Callable[[str], float]) -> int:
    cut = len(word) - 1
    while cut > 1 and measure(word[:cut]) > width:
        cut -= 1
    return max(cut, 1)


def thumbnail(picture: npt.NDArray[np.uint8], width: int, height: int) -> Any:
    """``picture`` scaled to fit inside ``width`` x ``height``, its aspect kept (a PIL image)."""
    from PIL import Image

    image = Image.fromarray(picture)
    scale = min(width / image.width, height / image.height)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.BICUBIC, reducing_gap=2.0)


def encode_sheet(image: Any, text: Mapping[str, str]) -> bytes:
    """``image`` as PNG within ``MAX_SIDE`` and ``MAX_BYTES``, with ``text`` as its text chunks (UTF-8)."""
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    for key, value in text.items():
        info.add_itxt(key, value)
    scale = min(1.0, MAX_SIDE / max(image.size))
    while True:
        scaled = image if scale == 1.0 else image.resize(
            (max(1, int(image.width * scale)), max(1, int(image.height * scale))), Image.Resampling.LANCZOS)
        for candidate in (scaled, scaled.quantize(256, method=Image.Quantize.FASTOCTREE)):
            buffer = io.BytesIO()
            candidate.save(buffer, format="PNG", pnginfo=info, compress_level=3)  # 9: 6x the time, 10 % smaller
            if buffer.tell() <= MAX_BYTES:
                return buffer.getvalue()
        scale *= 0.8  # even a palette is too big (noise-like footage): smaller, until it fits
