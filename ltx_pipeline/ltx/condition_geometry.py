"""The templates' condition geometry fitted to the run's buckets, in training and in validation alike.

The templates size their intrinsic conditions for 960x544x89 (12 latent frames): video-extend trains on a
prefix of ``temporal_boundary: 8`` latent frames and validates with a 57-frame prefix, "matching" it;
video-suffix likewise with 8 and 64; outpainting keeps the region (y1, x1, y2, x2) = (0, 0, 288, 576) in pixels.
Copied to a 25-frame bucket (4 latent frames), an 8-frame prefix is the whole clip: nothing is left to learn or
to generate. So each boundary keeps the template's share of the latent frames of the run's *smallest* bucket
(at least 1, at most one less than the bucket has, so every bucket keeps something to generate), the validation
prefix/suffix is derived from it exactly as the templates' comments do ((N - 1) * 8 + 1 frames for a prefix,
N * 8 for a suffix), and a crop region keeps its share of the smallest bucket's frame on the 32-pixel grid.
An audio prefix/suffix ``duration`` (seconds, in validation) keeps its share of the template's length too,
measured on the smallest bucket at the validation frame rate: shipped as is, 1.0 s is longer than a 17-frame
render. Training's audio boundaries (audio latent timesteps, about 25 a second) are left as shipped. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Geometry", "fit_training_condition", "fit_validation_condition"]

_TIME, _SPACE = 8, 32  # the VAE's compression: 8 frames per latent frame, 32 pixels per latent pixel


@dataclass(frozen=True)
class Geometry:
    """Width, height and frames of a clip or validation render."""

    width: int
    height: int
    frames: int

    @classmethod
    def of(cls, dims: Sequence[int]) -> Geometry:
        width, height, frames = (int(d) for d in dims)
        return cls(width, height, frames)

    @property
    def latent_frames(self) -> int:
        return (self.frames - 1) // _TIME + 1


def _boundary(boundary: int, smallest: Geometry, template: Geometry) -> int:
    share = boundary / template.latent_frames
    return max(1, min(smallest.latent_frames - 1, round(share * smallest.latent_frames)))


def _region(region: Sequence[int], smallest: Geometry, template: Geometry) -> list[int]:
    def grid(value: int, size: int, template_size: int) -> int:
        return min(size, max(0, round(value / max(template_size, 1) * size / _SPACE) * _SPACE))

    y1, x1, y2, x2 = (int(v) for v in region)
    top, left = grid(y1, smallest.height, template.height), grid(x1, smallest.width, template.width)
    bottom = max(top + _SPACE, grid(y2, smallest.height, template.height))
    right = max(left + _SPACE, grid(x2, smallest.width, template.width))
    return [top, left, min(bottom, smallest.height), min(right, smallest.width)]


def fit_training_condition(condition: dict[str, Any], smallest: Geometry, template: Geometry) -> dict[str, Any]:
    """A ``training_strategy.video.conditions`` entry fitted to the smallest bucket."""
    fitted = dict(condition)
    if fitted.get("type") in ("prefix", "suffix") and fitted.get("temporal_boundary") is not None:
        fitted["temporal_boundary"] = _boundary(int(fitted["temporal_boundary"]), smallest, template)
    if fitted.get("type") == "spatial_crop" and fitted.get("spatial_region") is not None:
        fitted["spatial_region"] = _region(fitted["spatial_region"], smallest, template)
    return fitted


def fit_validation_condition(condition: dict[str, Any], smallest: Geometry, template: Geometry,
                             trained: Sequence[dict[str, Any]] = (), frame_rate: float = 24.0) -> dict[str, Any]:
    """A validation condition fitted likewise; a video prefix/suffix matches the trained boundary when there is one.

    Args:
        condition: the template's validation condition.
        smallest: the run's smallest bucket.
        template: the template's validation dims (the geometry its numbers were written for).
        trained: the run's fitted ``training_strategy.video.conditions``.
        frame_rate: ``validation.frame_rate`` (an audio duration is measured in seconds of the render).
    """
    fitted = dict(condition)
    kind = fitted.get("type")
    if kind in ("prefix", "suffix") and "video" in fitted and fitted.get("num_frames") is not None:
        boundary = next((int(c["temporal_boundary"]) for c in trained
                         if c.get("type") == kind and c.get("temporal_boundary") is not None), None)
        if boundary is None:  # no trained boundary: the template's share of the frames, in latent frames
            frames = int(fitted["num_frames"])
            boundary = _boundary(max(1, (frames - 1) // _TIME + 1 if kind == "prefix" else frames // _TIME),
                                 smallest, template)
        fitted["num_frames"] = (boundary - 1) * _TIME + 1 if kind == "prefix" else boundary * _TIME
    if kind in ("prefix", "suffix") and "audio" in fitted and fitted.get("duration") is not None:
        share = float(fitted["duration"]) / (template.frames / frame_rate)
        fitted["duration"] = round(min(float(fitted["duration"]), share * smallest.frames / frame_rate), 3)
    if kind == "spatial_crop" and fitted.get("spatial_region") is not None:
        region = next((list(c["spatial_region"]) for c in trained if c.get("type") == "spatial_crop"
                       and c.get("spatial_region") is not None), None)
        fitted["spatial_region"] = region or _region(fitted["spatial_region"], smallest, template)
    return fitted
