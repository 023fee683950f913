"""Resolution buckets ``WxHxF``: parsing, the trainer's geometry rules, and token counts.

The trainer's preprocessing splits on ';' then on a lowercase 'x' and requires W and H to be
multiples of the VAE spatial factor (32) and F = 8k + 1 (facts §6.3). Its transformer sequence
length per clip is (W/32) * (H/32) * ((F-1)/8 + 1) (facts §8).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.ltx.config_values import lax_int

__all__ = ["CHAINED_DEFAULT", "Bucket", "cheaper_dims", "format_buckets", "parse_bucket", "parse_buckets"]

SPATIAL_FACTOR = 32
TEMPORAL_FACTOR = 8
_BUCKET = re.compile(r"^\s*(\d{1,5})x(\d{1,5})x(\d{1,4})\s*$")


@dataclass(frozen=True, order=True)
class Bucket:
    """One resolution bucket: width, height, frames."""

    width: int
    height: int
    frames: int

    @property
    def latent_frames(self) -> int:
        return (self.frames - 1) // TEMPORAL_FACTOR + 1

    @property
    def latent_height(self) -> int:
        return self.height // SPATIAL_FACTOR

    @property
    def latent_width(self) -> int:
        return self.width // SPATIAL_FACTOR

    @property
    def tokens(self) -> int:
        """Video tokens per clip: the transformer's sequence length for this bucket."""
        return self.latent_width * self.latent_height * self.latent_frames

    def __str__(self) -> str:
        return f"{self.width}x{self.height}x{self.frames}"


# Seed 002's chained recipe: frames fall as resolution climbs, learning rate decays per stage.
CHAINED_DEFAULT: tuple[tuple[Bucket, float], ...] = (
    (Bucket(512, 288, 321), 1e-4),
    (Bucket(960, 544, 121), 5e-5),
    (Bucket(1920, 1088, 33), 2e-5),
)


def parse_bucket(text: str, where: str = "--buckets") -> Bucket:
    """Parse one ``WxHxF`` bucket and check the trainer's geometry rules.

    Raises:
        BadRequest: malformed text, W/H not multiples of 32, or F not 8k+1.
    """
    match = _BUCKET.match(text)
    if not match:
        raise BadRequest(
            f"Bucket {text!r} is not of the form WxHxF",
            where=where,
            fix='write buckets as lowercase "WxHxF" joined by ";", e.g. "960x544x49;512x288x121"',
        )
    width, height, frames = (int(g) for g in match.groups())
    if width <= 0 or height <= 0 or width % SPATIAL_FACTOR or height % SPATIAL_FACTOR:
        raise BadRequest(
            f"Bucket {text.strip()}: width and height must be positive multiples of 32, got {width}x{height}",
            where=where,
            fix=f"use e.g. {_round32(width)}x{_round32(height)}",
        )
    if frames < 1 or (frames - 1) % TEMPORAL_FACTOR:
        lower = max(1, (frames - 1) // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1)
        raise BadRequest(
            f"Bucket {text.strip()}: frames must be 8k+1 (1, 9, 17, ..., 49, ..., 121), got {frames}",
            where=where,
            fix=f"use {lower} or {lower + TEMPORAL_FACTOR} frames",
        )
    return Bucket(width, height, frames)


def parse_buckets(text: str, where: str = "--buckets") -> tuple[Bucket, ...]:
    """Parse ``"WxHxF;WxHxF"``; duplicates and empty segments are refused."""
    segments = text.split(";")
    if any(not s.strip() for s in segments):
        raise BadRequest(f"Bucket list {text!r} has an empty entry", where=where,
                         fix='separate buckets with single ";" and no trailing ";"')
    buckets = tuple(parse_bucket(s, where) for s in segments)
    if len(set(buckets)) != len(buckets):
        raise BadRequest(f"Bucket list {text!r} repeats a bucket", where=where, fix="list each bucket once")
    return buckets


def format_buckets(buckets: tuple[Bucket, ...] | list[Bucket]) -> str:
    return ";".join(str(b) for b in buckets)


def _round32(value: int) -> int:
    return max(SPATIAL_FACTOR, round(value / SPATIAL_FACTOR) * SPATIAL_FACTOR)


# -- a cheaper render size (an OOM fix, an evaluation retry): never raises any axis or the cost -------------


def _grid_floor(value: int, step: int, minimum: int) -> int | None:
    """The largest value on the trainer's grid (``step``: 32 pixels) at most ``value``, at least ``minimum``."""
    best = value // step * step
    return best if best >= minimum else None


def _frames_floor(value: int, minimum: int) -> int | None:
    best = (value - 1) // TEMPORAL_FACTOR * TEMPORAL_FACTOR + 1 if value >= 1 else 0
    return best if best >= minimum else None


def cheaper_dims(dims: object) -> list[int] | None:
    """About half the width, height and frames of ``dims`` on the trainer's grid, or None when no smaller valid.

    Each axis only falls (never below 32 pixels, or 9 frames unless the render already had fewer) and the
    pixel-frames (W x H x F) fall strictly; dims off the grid are first floored onto it.
    """
    raw = [lax_int(v) for v in dims] if isinstance(dims, (list, tuple)) and len(dims) == 3 else []
    values = [v for v in raw if v is not None and v >= 1]
    if len(values) != 3:
        return None
    width, height, frames = values
    new_width = _grid_floor(max(width // 2, min(width, SPATIAL_FACTOR)), SPATIAL_FACTOR, SPATIAL_FACTOR)
    new_height = _grid_floor(max(height // 2, min(height, SPATIAL_FACTOR)), SPATIAL_FACTOR, SPATIAL_FACTOR)
    new_frames = _frames_floor(max((frames - 1) // 2 + 1, min(frames, TEMPORAL_FACTOR + 1)), 1)
    if new_width is None or new_height is None or new_frames is None:
        return None
    if new_width * new_height * new_frames >= width * height * frames:
        return None
    return [new_width, new_height, new_frames]

