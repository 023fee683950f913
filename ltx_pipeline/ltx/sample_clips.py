"""Small real clips for the demo and the tests: a coloured square moving over a plain background.

Owns ``moving_square`` (the frames) and ``write_clip`` (an H.264 mp4 through ``media.write_video``,
with an optional tone as AAC). Every clip is a file any video player opens; its content is fully
described by its arguments, so a caption can say what it shows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import write_video

__all__ = ["COLOURS", "moving_square", "write_clip"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30), "green": (40, 190, 60), "blue": (40, 70, 220), "yellow": (230, 210, 40),
    "white": (240, 240, 240), "black": (15, 15, 15), "orange": (240, 140, 30), "purple": (140, 50, 180),
}


def moving_square(frames: int, height: int, width: int, colour: str, background: str,
                  phase: float = 0.0) -> npt.NDArray[np.uint8]:
    """``[frames, height, width, 3]``: a square of a third of the height sliding left to right."""
    video = np.empty((frames, height, width, 3), dtype=np.uint8)
    video[:] = COLOURS[background]
    side = max(2, height // 3)
    top = (height - side) // 2
    for index in range(frames):
        progress = (phase + index / max(1, frames - 1)) % 1.0
        left = int(progress * (width - side))
        video[index, top:top + side, left:left + side] = COLOURS[colour]
    return video


def write_clip(path: Path, frames: int, height: int, width: int, *, colour: str = "red",
               background: str = "blue", fps: float = 24.0, audio: bool = False, phase: float = 0.0) -> Path:
    """Write a moving-square clip (with a 440 Hz tone when ``audio``) as an mp4; returns the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tone = None
    if audio:
        sample_rate = 16000
        t = np.arange(int(sample_rate * frames / fps), dtype=np.float32) / sample_rate
        tone = (0.2 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)
    write_video(path, moving_square(frames, height, width, colour, background, phase), fps, tone)
    return path
