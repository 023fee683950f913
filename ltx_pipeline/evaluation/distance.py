"""How far generated videos are from the training clips, and from each other, measured on the mp4 files.

Owns two figures computed from decoded pixels only (never from a model's internals), so they say what a
user would see: ``nearest_clip_distance`` (mean absolute per-pixel difference, 0-255, from a sample to
the training clip it is closest to) per validation step, and ``pairwise_difference`` between renders of
different prompts. A clip is compared at the sample's size: its frames resampled to the sample's frame
count and resized to its width and height, because the trainer renders at the bucket's dims.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["SampleProgress", "nearest_clip_distance", "pairwise_difference", "sample_progress",
           "sample_progress_line"]

Frames = npt.NDArray[np.uint8]
_SAMPLE = re.compile(r"step_(\d+)_(\d+)\.mp4$")


def _frames(path: Path) -> Frames:
    from ltx_pipeline.ltx.media import read_frames

    return read_frames(path)


def _fit(clip: Frames, like: Frames) -> npt.NDArray[np.float32]:
    """``clip`` at ``like``'s frame count (evenly picked frames) and picture size (bilinear)."""
    from PIL import Image

    count, height, width, _ = like.shape
    picks = np.linspace(0, clip.shape[0] - 1, count).round().astype(int)
    frames = [clip[i] if clip.shape[1:3] == (height, width)
              else np.asarray(Image.fromarray(clip[i]).resize((width, height), Image.Resampling.BILINEAR))
              for i in picks]
    return np.stack(frames).astype(np.float32)


def _distance(a: Frames, b: Frames) -> float:
    return float(np.abs(a.astype(np.float32) - _fit(b, a)).mean())


def nearest_clip_distance(sample: Path, clips: Sequence[Frames]) -> float:
    """Mean absolute pixel difference (0-255) between ``sample`` and its nearest clip."""
    frames = _frames(sample)
    return min(_distance(frames, clip) for clip in clips)


def pairwise_difference(renders: Sequence[Path]) -> tuple[float, float]:
    """(smallest, mean) mean absolute pixel difference over every pair of ``renders`` (two or more)."""
    frames = [_frames(path) for path in renders]
    pairs = [_distance(a, b) for a, b in combinations(frames, 2)]
    if not pairs:
        raise ValueError("pairwise_difference needs at least two renders")
    return min(pairs), float(np.mean(pairs))


@dataclass(frozen=True)
class SampleProgress:
    """Mean nearest-clip distance of each validation step's samples, first and last step."""

    first_step: int
    first: float
    last_step: int
    last: float

    @property
    def change(self) -> float:
        """Relative change from the first step to the last (negative = closer to the clips)."""
        return (self.last - self.first) / self.first if self.first else 0.0


def sample_progress(samples_dir: Path, clip_files: Sequence[Path]) -> SampleProgress | None:
    """The distance figure for ``samples/step_S_K.mp4`` files; None with fewer than two steps or no clips."""
    steps: dict[int, list[Path]] = {}
    for path in sorted(samples_dir.glob("step_*_*.mp4")):
        match = _SAMPLE.search(path.name)
        if match:
            steps.setdefault(int(match.group(1)), []).append(path)
    if len(steps) < 2 or not clip_files:
        return None
    clips = [_frames(path) for path in clip_files]
    first, last = min(steps), max(steps)

    def mean_distance(step: int) -> float:
        return float(np.mean([nearest_clip_distance(path, clips) for path in steps[step]]))

    return SampleProgress(first, mean_distance(first), last, mean_distance(last))


def sample_progress_line(progress: SampleProgress) -> str:
    """One line for a user: the figure, its unit, and what it is measured on."""
    return (f"samples vs nearest training clip (mean absolute pixel difference, 0-255): step {progress.first_step} "
            f"{progress.first:.1f}, step {progress.last_step} {progress.last:.1f} ({progress.change:+.0%})")
