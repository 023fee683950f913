"""Labelled synthetic footage for measuring scene detection: shots whose cuts are known to the frame.

A shot films a "world" (smooth multi-scale noise through a palette, with hard-edged shapes on it) through a
camera that pans across it, with objects moving in front and per-frame sensor noise, so that neither a
still frame nor a flat colour makes detection easy. What the detectors are measured on
(``benchmarks/bench_scene_detection.py``) and what the tests write:

- a hard cut: the next shot films another world (another seed: other structure and palette), or another
  world in the same colours (``palette``: another angle of the same place, same light);
- a colour-only cut: the same world, the camera carrying on where it was, under another colour grade
  (hue rotated with the luma kept, so a luma-only detector cannot see it);
- no cut: one shot with a fast pan, fast objects and flashes (a few overexposed frames);
- a dissolve: the next shot fades in over ``dissolve`` frames (its cut is labelled at the middle).

Pure numpy; ``write_footage`` encodes with ``ltx.media.write_video``; ``write_long_footage`` streams a long
high-resolution video (rendered small, scaled up, grain added at full size) for timing the scan.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ltx_pipeline.ltx.media import write_video

__all__ = ["Shot", "long_shots", "render", "true_cuts", "write_footage", "write_long_footage"]

Frames = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Shot:
    """``frames`` frames of world ``seed`` under hue rotation ``grade`` (degrees), the camera moving ``pan``
    pixels a frame; ``flashes`` are shot-local frames overexposed for two frames; ``dissolve`` frames of the
    previous shot fade into this one (0: a straight cut); ``continues`` keeps the previous shot's camera
    position (a colour-only cut films the same place)."""

    frames: int
    seed: int
    grade: float = 0.0
    pan: tuple[float, float] = (1.5, 0.5)
    objects: int = 2
    object_speed: float = 2.0
    flashes: tuple[int, ...] = ()
    dissolve: int = 0
    continues: bool = False
    noise: float = 4.0
    palette: int | None = None  # the world's colours come from this seed (default: ``seed``)


def true_cuts(shots: list[Shot]) -> list[int]:
    """The frame at which each shot after the first begins (a dissolve's at its middle)."""
    cuts, start = [], 0
    for shot in shots:
        if start:
            cuts.append(start - shot.dissolve // 2 if shot.dissolve else start)
        start += shot.frames - (shot.dissolve if start else 0)
    return cuts


def render(shots: list[Shot], width: int = 128, height: int = 96) -> Frames:
    """``[F, H, W, 3]`` uint8 RGB frames of the shots in order (dissolves overlap neighbouring shots)."""
    pieces: list[Frames] = []
    camera = (0.0, 0.0)
    for number, shot in enumerate(shots):
        start = camera if shot.continues else (float(shot.seed * 37 % 300), float(shot.seed * 53 % 200))
        frames, camera = _film(shot, width, height, start, number)
        if pieces and shot.dissolve:
            tail = pieces[-1][-shot.dissolve:].astype(np.float32)
            weight = np.linspace(0, 1, shot.dissolve + 2, dtype=np.float32)[1:-1, None, None, None]
            blended = (tail * (1 - weight) + frames[:shot.dissolve].astype(np.float32) * weight)
            pieces[-1] = pieces[-1][:-shot.dissolve]
            frames = np.concatenate([np.clip(blended, 0, 255).astype(np.uint8), frames[shot.dissolve:]])
        pieces.append(frames)
    return np.concatenate(pieces)


def write_footage(path: Path, shots: list[Shot], *, width: int = 128, height: int = 96, fps: float = 24.0) -> Path:
    """Render the shots and write them as an H.264 mp4 at ``path``."""
    write_video(path, render(shots, width, height), fps)
    return path


def long_shots(seconds: float, fps: float = 24.0, seed: int = 0) -> list[Shot]:
    """Shots of 30-150 frames filling ``seconds``, each of another world, the camera panning slowly."""
    rng = np.random.default_rng(seed)
    shots: list[Shot] = []
    left = int(seconds * fps)
    while left > 0:
        frames = min(left, int(rng.integers(30, 151)))
        shots.append(Shot(frames, 1 + seed * 10_000 + len(shots), pan=(float(rng.uniform(-3, 3)),
                                                                      float(rng.uniform(-1, 1))), noise=0.0))
        left -= frames
    return shots


def write_long_footage(path: Path, shots: list[Shot], *, width: int = 1280, height: int = 720,
                       fps: float = 24.0) -> Path:
    """``shots`` as an H.264 mp4 at ``width`` x ``height``, rendered at 320 px wide and scaled up, with sensor
    grain at full size; one shot in memory at a time (a 10-minute 720p video fits in no memory)."""
    import av
    import cv2

    grain = np.random.default_rng(len(shots)).normal(0, 3, (7, height, width, 3)).astype(np.int16)
    small = (320, max(2, round(320 * height / width / 2) * 2))
    count = 0
    partial = path.with_name(f".{path.name}.tmp.{os.getpid()}.mp4")  # the file appears only once complete
    with av.open(str(partial), "w") as container:
        stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": "20", "preset": "veryfast"}
        for shot in shots:
            for frame in render([shot], *small):
                big = cv2.resize(frame, (width, height), interpolation=cv2.INTER_CUBIC).astype(np.int16)
                picture = np.clip(big + grain[count % len(grain)], 0, 255).astype(np.uint8)
                container.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
                count += 1
        container.mux(stream.encode(None))
    os.replace(partial, path)
    return path


def _world(seed: int, palette_seed: int, width: int, height: int) -> npt.NDArray[np.float64]:
    """A wrap-around RGB texture three frames wide and two high, in [0, 255] (float64: ``t`` below is
    float32 minus integers)."""
    rng = np.random.default_rng(seed)
    big_h, big_w = height * 2, width * 3
    field_ = np.zeros((big_h, big_w), np.float32)
    for cells, amplitude in ((3, 1.0), (8, 0.5), (24, 0.25), (big_w // 2, 0.12)):  # coarse to fine detail
        coarse = rng.random((max(2, cells * big_h // big_w), cells)).astype(np.float32)
        rows = np.linspace(0, coarse.shape[0] - 1, big_h)
        cols = np.linspace(0, coarse.shape[1] - 1, big_w)
        r0, c0 = np.floor(rows).astype(int), np.floor(cols).astype(int)
        r1, c1 = np.minimum(r0 + 1, coarse.shape[0] - 1), np.minimum(c0 + 1, coarse.shape[1] - 1)
        fr, fc = (rows - r0)[:, None], (cols - c0)[None, :]
        top = coarse[r0][:, c0] * (1 - fc) + coarse[r0][:, c1] * fc
        bottom = coarse[r1][:, c0] * (1 - fc) + coarse[r1][:, c1] * fc
        field_ += amplitude * (top * (1 - fr) + bottom * fr)
    field_ = (field_ - field_.min()) / max(1e-6, float(np.ptp(field_)))
    palette = np.random.default_rng([palette_seed, 7]).integers(10, 246, (4, 3)).astype(np.float32)
    position = field_ * 3
    low = np.clip(np.floor(position).astype(int), 0, 2)
    t = (position - low)[..., None]
    world: npt.NDArray[np.float64] = palette[low] * (1 - t) + palette[low + 1] * t
    for _ in range(int(rng.integers(6, 14))):  # hard-edged shapes: buildings, windows, signs
        h, w = int(rng.integers(height // 8, height // 2)), int(rng.integers(width // 10, width // 2))
        y, x = int(rng.integers(0, big_h - h)), int(rng.integers(0, big_w - w))
        world[y:y + h, x:x + w] = rng.integers(0, 256, 3)
    return world


def _grade(frame: npt.NDArray[np.float64], degrees: float) -> npt.NDArray[np.float64]:
    """Rotate the hue (in YIQ) by ``degrees`` and keep the luma: another colour grade of the same picture."""
    if not degrees:
        return frame
    to_yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]], np.float32)
    angle = np.deg2rad(degrees)
    turn = np.array([[1, 0, 0], [0, np.cos(angle), -np.sin(angle)], [0, np.sin(angle), np.cos(angle)]], np.float32)
    matrix = np.linalg.inv(to_yiq) @ turn @ to_yiq
    return frame @ matrix.T.astype(np.float32)


def _film(shot: Shot, width: int, height: int, start: tuple[float, float],
          number: int) -> tuple[Frames, tuple[float, float]]:
    world = _world(shot.seed, shot.seed if shot.palette is None else shot.palette, width, height)
    tiled = np.concatenate([world, world], axis=1)
    tiled = np.concatenate([tiled, tiled], axis=0)
    big_h, big_w = world.shape[:2]
    rng = np.random.default_rng(shot.seed * 1000 + number)
    positions = rng.random((shot.objects, 2)) * [height, width]
    angles = rng.random(shot.objects) * 2 * np.pi
    velocity = np.stack([np.sin(angles), np.cos(angles)], axis=1) * shot.object_speed
    colours = rng.integers(0, 256, (shot.objects, 3)).astype(np.float32)
    radius = max(3, height // 10)
    yy, xx = np.mgrid[0:height, 0:width]
    out = np.empty((shot.frames, height, width, 3), np.uint8)
    y, x = start
    for index in range(shot.frames):
        top, left = int(y) % big_h, int(x) % big_w
        frame = tiled[top:top + height, left:left + width].copy()
        for (oy, ox), colour in zip(positions, colours, strict=True):
            frame[(yy - oy) ** 2 + (xx - ox) ** 2 < radius ** 2] = colour
        frame = _grade(frame, shot.grade)
        if any(0 <= index - flash < 2 for flash in shot.flashes):
            frame = frame * 1.6 + 90
        frame += rng.normal(0, shot.noise, frame.shape).astype(np.float32)
        out[index] = np.clip(frame, 0, 255).astype(np.uint8)
        y, x = y + shot.pan[1], x + shot.pan[0]
        positions = positions + velocity
        bounce = (positions < 0) | (positions > [height, width])
        velocity = np.where(bounce, -velocity, velocity)
    return out, (y, x)
