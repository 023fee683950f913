"""Find the scene cuts in a user's video (plan time), as the trainer's ``scripts/split_scenes.py`` does.

Contract:

- ``detect_scenes`` / ``scan_videos`` (``scenes/scan.py``: the plan's scan, cached, on every core) find cuts with
  ``DETECTOR``: PySceneDetect's ``AdaptiveDetector`` at ratio 2.0 (its default is 3.0; ``min_content_val`` its
  own 15) with at least 8 frames between cuts, then two checks on 16-px averages of the frames around each cut:
  a flash (the picture comes back within 5 frames) and an object jumping across a still picture (under 30 % of
  the picture changed) are no cut. Frames are decoded once with PyAV (no ffmpeg binary) at most
  ``DETECTION_WIDTH`` (256) px wide. A video without a cut is one scene.
- Chosen by measurement, not by default settings: ``benchmarks/bench_scene_detection.py`` writes footage with
  known cuts (``scenes/footage.py``: textured worlds, panning camera, moving objects, sensor noise; hard
  cuts, cuts between alike shots in the same colours, colour-only cuts, fast motion, flashes, a still camera
  with fast objects, dissolves) and scores every candidate through ``scan_cuts``, the very code that runs here.
  On 6 videos of each kind (92 true cuts, 12,305 frames): the trainer's ``ContentDetector`` 27 missed 12 % of
  the cuts between alike shots and 5 % of the colour-only ones, and cut at flashes (32 false cuts); adaptive 2
  alone found every cut and cut at flashes too (32); adaptive 2 with the two checks found all 92 cuts with no
  false one (adaptive 3 with them missed 8 % of the alike cuts). The share-changed check changes nothing
  there; it is for an object jumping across a still picture (``tests/unit/test_scene_detection.py``).
  Dissolves are found by no setting that keeps colour-only cuts and flashes right (a histogram detector finds
  them and misses 57 % of the colour-only cuts): a dissolved scene change stays inside one clip.
- Where ours differs from ``split_scenes.py`` and why: it runs ``ContentDetector`` 27 (measured worse, above);
  its ``--min-scene-length`` merges a short shot into the next (a cut swallowed, two shots in one clip), ours
  keeps every cut and drops the scenes shorter than the smallest bucket (its ``--filter-shorter-than``, tied to
  the bucket because the trainer cannot fill a bucket from fewer frames); a video without a cut gives it no
  scene at all (``get_scene_list()`` is empty), ours one scene, staged as it is; it cuts with ffmpeg (a binary
  we do not need), ours with PyAV (``scenes/cut.py``). Kept: PySceneDetect, detection on frames downscaled to
  ~256 px (its auto-downscale), every scene long enough written as its own clip, the clips named by scene number.
- When: the plan phase looks at every video of a folder or single video file, whatever its length, so that
  plan.md says what it found (scenes per video, scenes dropped) and the sample count and holdout are exact
  before approval. That costs one decode of each video, which a user would rather wait for once than approve a
  plan that does not say what it will train on; it is kept cheap: 256-px frames, nothing written, and the cuts
  of each file cached in the workspace by path, size and mtime (re-planning decodes nothing twice). The videos
  not cached are scanned on every usable core (``scenes.parallel``: a process pool over videos, and over time
  segments of a long video, with exactly the cuts of this serial scan). Measured (``bench_scene_detection.py
  --parallel``, 2 cores shared with other work): a 720p H.264 video at about 375 frames/s serially with one
  scaler for all frames (190 before, with one per frame) and 500 frames/s on both cores. The cutting itself
  (re-encoding) is heavy and waits for approval, in the prepare phase.
- Cutting the scenes found into clips (re-encoding, in the prepare phase) is ``scenes/cut.py``.
- A source that cannot be read raises ``ltx.media.BadMedia`` naming the file (``scan_videos`` records it instead,
  and the plan says the video could not be looked at).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ltx_pipeline.ltx.media import BadMedia, MediaInfo, read_media_info

__all__ = ["DETECTION_WIDTH", "DETECTOR", "DetectorSpec", "Scene", "detect_scenes", "scan_cuts", "video_info"]

DETECTION_WIDTH = 256  # frames are decoded at most this wide for detection (PySceneDetect's auto-downscale target)
_FLASH_RATIO = 0.4  # see _drop_false_cuts
_CELL_CHANGE = 12.0  # levels of 255 by which a 16-px cell's colour moves for it to count as changed


@dataclass(frozen=True)
class DetectorSpec:
    """One PySceneDetect detector and its settings: ``kind`` is content, adaptive, histogram or hash;
    ``threshold`` is that detector's own (adaptive: its ratio); ``min_scene_len`` frames must pass after a cut
    before the next (what keeps a flash from cutting twice)."""

    kind: str
    threshold: float
    min_scene_len: int = 15
    flash_frames: int = 0  # > 0: a cut after which the picture is back within this many frames is a flash
    min_changed: float = 0.0  # the share of the picture a cut must change (a moving object changes a part)

    @property
    def label(self) -> str:
        flash = f", flash {self.flash_frames} f" if self.flash_frames else ""
        changed = f", changed {self.min_changed:.0%}" if self.min_changed else ""
        return f"{self.kind} {self.threshold:g}, min {self.min_scene_len} f{flash}{changed}"

    @property
    def words(self) -> str:
        """The settings as plan.md says them."""
        name = {"content": "ContentDetector", "adaptive": "AdaptiveDetector", "histogram": "HistogramDetector",
                "hash": "HashDetector"}.get(self.kind, self.kind)
        checks = [f"a flash (the picture back within {self.flash_frames} frames)" if self.flash_frames else "",
                  f"a change of under {self.min_changed:.0%} of the picture (an object moving)"
                  if self.min_changed else ""]
        named = [c for c in checks if c]
        return (f"PySceneDetect's {name} at {self.threshold:g}, cuts at least {self.min_scene_len} frames apart"
                + (f"; not a cut: {' or '.join(named)}" if named else ""))

    def make(self) -> Any:
        import scenedetect

        if self.kind == "content":
            return scenedetect.ContentDetector(threshold=self.threshold, min_scene_len=self.min_scene_len)
        if self.kind == "adaptive":
            return scenedetect.AdaptiveDetector(adaptive_threshold=self.threshold, min_scene_len=self.min_scene_len)
        if self.kind == "histogram":
            return scenedetect.HistogramDetector(threshold=self.threshold, min_scene_len=self.min_scene_len)
        if self.kind == "hash":
            return scenedetect.HashDetector(threshold=self.threshold, min_scene_len=self.min_scene_len)
        raise ValueError(f"unknown detector kind {self.kind!r}")


DETECTOR = DetectorSpec("adaptive", 2.0, 8, 5, 0.3)  # chosen by benchmarks/bench_scene_detection.py (see the docstring)


@dataclass(frozen=True)
class Scene:
    """Frames ``[start_frame, end_frame)`` of a video at ``fps``; ``index`` counts from 1."""

    index: int
    start_frame: int
    end_frame: int
    fps: float

    @property
    def start_s(self) -> float:
        return self.start_frame / self.fps

    @property
    def end_s(self) -> float:
        return self.end_frame / self.fps

    @property
    def frames(self) -> int:
        return self.end_frame - self.start_frame

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


def detect_scenes(video: Path, *, detector: DetectorSpec = DETECTOR) -> list[Scene]:
    """The scenes of ``video`` in order, cut wherever ``detector`` finds a cut; ``BadMedia`` if unreadable."""
    fps, total, (cuts,) = scan_cuts(video, [detector])
    bounds = [0, *(cut for cut in cuts if 0 < cut < total), total]
    spans = zip(bounds, bounds[1:], strict=False)
    return [Scene(i, start, end, fps) for i, (start, end) in enumerate(spans, 1) if end > start]


def scan_cuts(video: Path, detectors: list[DetectorSpec], *, threads: int = 0) -> tuple[float, int, list[list[int]]]:
    """Decode ``video`` once, at most ``DETECTION_WIDTH`` wide, and feed every frame to each detector.

    Returns the fps, the number of frames decoded and, per detector, the frames at which a new scene starts.
    The benchmark measures detectors through this very function, so what it measures is what runs.
    ``threads``: the decoder's threads (0: FFmpeg's choice, one per core; a pool's worker takes 1, its core
    being one of the pool's). Decoded pictures are the same whatever the threads (H.264 decoding is exact).
    """
    import av
    from scenedetect import FrameTimecode

    video_info(video)
    made = [spec.make() for spec in detectors]
    cuts: list[list[int]] = [[] for _ in made]
    thumbs: dict[int, Any] = {}  # the last frames, tiny, for the flash check
    span = max([max(spec.flash_frames, 1 if spec.min_changed else 0) for spec in detectors] + [0])
    checked: list[set[int]] = [set() for _ in made]
    index, fps = 0, 0.0
    try:
        with av.open(str(video)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            if threads:
                stream.codec_context.thread_count = threads
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            if fps <= 0:
                raise BadMedia(video, "has no frame rate")
            scale = _scaler(*_detection_size(stream.codec_context.width, stream.codec_context.height))
            for frame in container.decode(stream):
                picture = scale(frame)
                stamp = FrameTimecode(index, fps)
                for found, detector in zip(cuts, made, strict=True):
                    found += [int(cut.frame_num) for cut in detector.process_frame(stamp, picture)]
                if span:
                    thumbs[index] = _thumb(picture)
                    thumbs.pop(index - 4 * span - 64, None)  # detectors report a cut at most min_scene_len late
                    for found, done, spec in zip(cuts, checked, detectors, strict=True):
                        if spec.flash_frames or spec.min_changed:
                            _drop_false_cuts(found, done, spec, index, thumbs)
                index += 1
            end = FrameTimecode(index, fps)
            for found, done, detector, spec in zip(cuts, checked, made, detectors, strict=True):
                found += [int(cut.frame_num) for cut in detector.post_process(end)]
                if spec.flash_frames or spec.min_changed:  # the last cuts, with what frames there are after them
                    _drop_false_cuts(found, done, spec, index + spec.flash_frames, thumbs)
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(video, f"does not decode ({str(exc).splitlines()[0][:160]})") from None
    if not index:
        raise BadMedia(video, "has no frame")
    return fps, index, [sorted(set(found)) for found in cuts]


def _scaler(width: int, height: int) -> Callable[[Any], Any]:
    """Decoded frames to ``width`` x ``height`` BGR arrays, as PySceneDetect's own video backends hand frames to
    its detectors. One swscale context for every frame: ``frame.to_ndarray(width=...)`` builds a new one per
    frame, which cost 4x as much at 720p for the very same pixels (``benchmarks/bench_scene_detection.py
    --parallel`` checks the cuts against that way)."""
    from av.video.reformatter import VideoReformatter

    reformatter = VideoReformatter()

    def scale(frame: Any) -> Any:
        return reformatter.reformat(frame, width=width, height=height, format="bgr24").to_ndarray()

    return scale


def _thumb(picture: Any) -> Any:
    """A 16-pixel-wide average of the frame: its light and colours, not its detail."""
    import cv2

    height = max(1, round(16 * picture.shape[0] / picture.shape[1]))
    return cv2.resize(picture, (16, height), interpolation=cv2.INTER_AREA).astype(np.float32)


def _drop_false_cuts(found: list[int], checked: set[int], spec: DetectorSpec, index: int,
                     thumbs: dict[int, Any]) -> None:
    """Drop each cut of ``found`` (once ``spec.flash_frames`` past it) that is a flash or a moving object.

    The detectors score a frame by its average change, which a cut shares with two things that are not cuts:
    - a flash (a camera flash, lightning, a muzzle flash) changes every pixel for a frame or two, then the
      picture comes back; a cut does not come back. Back: a frame of the ``flash_frames`` before the cut and
      one of the ``flash_frames`` from it on differ by less than 40 % of the jump at the cut, on 16-px
      averages (camera motion over a few frames counts for little there; alike shots still differ across);
    - an object jumping or sweeping across a still picture changes a part of it; a cut changes most of it.
      Changed: a 16-px cell whose colour moves by more than ``_CELL_CHANGE`` levels; fewer than
      ``min_changed`` of the cells changed is no cut.
    """
    span = spec.flash_frames
    for cut in [c for c in found if c not in checked and c + span <= index]:
        checked.add(cut)
        if cut - 1 not in thumbs or cut not in thumbs:
            continue
        step = np.abs(thumbs[cut] - thumbs[cut - 1])
        if spec.min_changed and float((step.mean(axis=2) > _CELL_CHANGE).mean()) < spec.min_changed:
            found.remove(cut)
            continue
        if span:
            before = [thumbs[i] for i in range(cut - 1 - span, cut) if i in thumbs]
            after = [thumbs[i] for i in range(cut, cut + span + 1) if i in thumbs]
            if min(float(np.abs(a - b).mean()) for a in after for b in before) < _FLASH_RATIO * float(step.mean()):
                found.remove(cut)


def _detection_size(width: int, height: int) -> tuple[int, int]:
    """The frame size detection runs at: ``DETECTION_WIDTH`` wide at most (even sides), as PySceneDetect's
    auto-downscale does (it aims at 256 px); a cut between shots is as visible at 256 px as at 4K."""
    if width <= DETECTION_WIDTH:
        return width, height
    return DETECTION_WIDTH, max(2, round(height * DETECTION_WIDTH / width / 2) * 2)


def video_info(video: Path) -> MediaInfo:
    """``video``'s media facts; ``BadMedia`` if it does not read or is not a video."""
    info = read_media_info(video)
    if info.kind != "video":
        raise BadMedia(video, "not a video")
    return info
