"""``samples/contact-sheet.png``: every validation sample's first, middle and last frame, per step.

One row per validation step (step 0 first, the base model's samples when initial validation ran),
three frames per sample side by side, labelled with the step and sample number, so a user sees at a
glance whether the samples move toward the training clips. Reads the trainer's
``step_NNNNNN_k.mp4`` files with PyAV (``ltx.media``); samples that do not decode are left out and
named in the returned list, never raised.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ltx_pipeline.ltx.media import BadMedia, read_frames
from ltx_pipeline.workspace import atomic_write

__all__ = ["SAMPLE_NAME", "write_contact_sheet"]

SAMPLE_NAME = re.compile(r"step_(\d+)_(\d+)\.mp4$")
_LABEL = 14  # pixels above each row for its caption
_GAP = 4


def write_contact_sheet(samples_dir: Path, path: Path, *, workspace: Path) -> tuple[Path | None, list[str]]:
    """Write the sheet for the mp4 samples in ``samples_dir``; returns (path or None, unreadable names)."""
    from PIL import Image, ImageDraw

    found: dict[int, dict[int, Path]] = {}
    for sample in samples_dir.glob("step_*.mp4") if samples_dir.is_dir() else []:
        match = SAMPLE_NAME.match(sample.name)
        if match:
            found.setdefault(int(match[1]), {})[int(match[2])] = sample
    rows: list[tuple[int, list[np.ndarray]]] = []
    unreadable: list[str] = []
    for step in sorted(found):
        strips = []
        for index in sorted(found[step]):
            try:
                frames = read_frames(found[step][index])
            except BadMedia:
                unreadable.append(found[step][index].name)
                continue
            picks = [frames[0], frames[len(frames) // 2], frames[-1]]
            strips.append(np.concatenate(picks, axis=1))
        if strips:
            rows.append((step, strips))
    if not rows:
        return None, unreadable
    cell_h = max(strip.shape[0] for _, strips in rows for strip in strips)
    width = max(sum(s.shape[1] for s in strips) + _GAP * (len(strips) - 1) for _, strips in rows)
    sheet = Image.new("RGB", (max(width, 160), len(rows) * (cell_h + _LABEL + _GAP)), "white")
    draw = ImageDraw.Draw(sheet)
    for row, (step, strips) in enumerate(rows):
        top = row * (cell_h + _LABEL + _GAP)
        draw.text((2, top), f"step {step}: first | middle | last frame of each sample", fill="black")
        left = 0
        for strip in strips:
            sheet.paste(Image.fromarray(strip), (left, top + _LABEL))
            left += strip.shape[1] + _GAP
    import io

    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return atomic_write(path, buffer.getvalue(), root=workspace), unreadable
