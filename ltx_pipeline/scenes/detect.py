"""Split a user's video into one training clip per scene, as the trainer's ``scripts/split_scenes.py`` does.

Contract:

- ``detect_scenes`` / ``scan_videos`` find cuts with ``DETECTOR``: PySceneDetect's ``AdaptiveDetector`` at ratio
  2.0 (its default is 3.0; ``min_content_val`` its own 15) with at least 8 frames between cuts, then two checks on
  16-px averages of the frames around each cut: a flash (the picture comes back within 5 frames) and an object
  jumping across a still picture (under 30 % of the picture changed) are no cut. Frames are decoded once with
  PyAV (no ffmpeg binary) at most ``DETECTION_WIDTH`` (256) px wide. A video without a cut is one scene.
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
  we do not need), ours with PyAV as below. Kept: PySceneDetect, detection on frames downscaled to ~256 px (its
  auto-downscale), every scene long enough written as its own clip, the clips named by scene number.
- When: the plan phase looks at every video of a folder or single video file, whatever its length, so that
  plan.md says what it found (scenes per video, scenes dropped) and the sample count and holdout are exact
  before approval. That costs one decode of each video, which a user would rather wait for once than approve a
  plan that does not say what it will train on; it is kept cheap: 256-px frames, nothing written, and the cuts
  of each file cached in the workspace by path, size and mtime (re-planning decodes nothing twice). Measured:
  a 720p H.264 video is looked at at about 140 frames/s on 2 shared cores (6x real time at 24 fps). The
  cutting itself (re-encoding) is heavy and waits for approval, in the prepare phase.
- ``cut_scenes`` decodes the source once, front to back, and streams every scene of at least ``min_frames`` frames
  into ``<stem>-scene-NNN.mp4``: H.264 yuv420p crf 18 as ``ltx.media.write_video`` writes, at the source's fps and
  size (an odd side loses one pixel), with the scene's span of the first audio track as AAC (mono, else stereo)
  when there is one. It streams rather than call ``write_video``, which holds a whole scene in memory (a minute
  of 1080p is about 9 GB of frames).
- Each clip appears atomically (temp name beside it, then ``os.replace``) and carries a tag in its mp4 ``comment``
  naming the source and the span. A rerun reuses a clip whose tag and frame count match, rewrites a clip tagged
  by us for another span, and refuses (``BadInput``) to overwrite a file it did not write.
- Shorter scenes are not written; they come back in ``SplitResult.dropped`` with the reason.
- A source that cannot be read raises ``ltx.media.BadMedia`` naming the file (``scan_videos`` records it instead,
  and the plan says the video could not be looked at).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ltx_pipeline.engine.reporting import Reporter
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.media import BadMedia, MediaInfo, read_media_info

__all__ = ["DETECTION_WIDTH", "DETECTOR", "DetectorSpec", "Scene", "SplitClip", "SplitResult", "cut_scenes",
           "detect_scenes", "find_cuts", "scan_cuts", "scan_videos"]

DETECTION_WIDTH = 256  # frames are decoded at most this wide for detection (PySceneDetect's auto-downscale target)
_TAG = "ltx-pipeline scene "  # prefix of the mp4 comment that marks a clip as ours
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


@dataclass(frozen=True)
class SplitClip:
    """A clip written (or found already written) for ``scene``."""

    path: Path
    scene: Scene


@dataclass(frozen=True)
class SplitResult:
    """The clips in scene order, and the scenes left out with why, so the caller can narrate both."""

    clips: tuple[SplitClip, ...]
    dropped: tuple[tuple[Scene, str], ...]


def detect_scenes(video: Path, *, detector: DetectorSpec = DETECTOR) -> list[Scene]:
    """The scenes of ``video`` in order, cut wherever ``detector`` finds a cut; ``BadMedia`` if unreadable."""
    fps, total, (cuts,) = scan_cuts(video, [detector])
    bounds = [0, *(cut for cut in cuts if 0 < cut < total), total]
    spans = zip(bounds, bounds[1:], strict=False)
    return [Scene(i, start, end, fps) for i, (start, end) in enumerate(spans, 1) if end > start]


class ScanCache(Protocol):
    """The journal's workspace-wide media facts cache (``probing.FactsCache``), keyed by path, size and mtime."""

    def cached_media_facts(self, keys: list[tuple[str, int, int]]) -> dict[str, dict[str, Any]]: ...

    def remember_media_facts(self, rows: list[tuple[str, int, int, dict[str, Any]]]) -> None: ...


def scan_videos(videos: list[Path], *, detector: DetectorSpec = DETECTOR, cache: ScanCache | None = None,
                on_progress: Callable[[int, int], None] | None = None) -> dict[str, dict[str, Any]]:
    """Each video's cuts: path -> {"fps", "frames", "cuts"}, or {"error": why} when it does not decode.

    A file's cuts are cached by path, size, mtime and detector (re-planning decodes nothing twice).
    """
    suffix = f"#scenes {detector.label} at {DETECTION_WIDTH} px"
    keys = [(str(video) + suffix, *_identity(video)) for video in videos]
    cached = cache.cached_media_facts(keys) if cache is not None and keys else {}
    found: dict[str, dict[str, Any]] = {}
    fresh: list[tuple[str, int, int, dict[str, Any]]] = []
    for done, (video, key) in enumerate(zip(videos, keys, strict=True), start=1):
        if key[0] in cached:
            found[str(video)] = cached[key[0]]
        else:
            try:
                fps, frames, (cuts,) = scan_cuts(video, [detector])
            except BadMedia as exc:
                found[str(video)] = {"error": exc.reason}  # never cached: the user may fix the file
            else:
                found[str(video)] = {"fps": fps, "frames": frames, "cuts": [c for c in cuts if 0 < c < frames]}
                if key[1] >= 0:
                    fresh.append((*key, found[str(video)]))
        if on_progress is not None:
            on_progress(done, len(videos))
    if cache is not None and fresh:
        cache.remember_media_facts(fresh)
    return found


class _PlanContext(Protocol):
    @property
    def journal(self) -> Any: ...

    @property
    def reporter(self) -> Reporter: ...

    def narrate(self, text: str) -> None: ...


def find_cuts(ctx: _PlanContext, videos: list[str]) -> dict[str, dict[str, Any]]:
    """``scan_videos`` for the plan phase: says what it does, caches in the run's journal."""
    if not videos:
        return {}
    ctx.narrate(f"Looking for scene cuts in {len(videos)} video(s) ({DETECTOR.kind} detector, frames decoded at "
                f"most {DETECTION_WIDTH} px wide; cached per file, so re-planning decodes nothing twice)...")
    def progress(done: int, total: int) -> None:  # the CLI's progress bar (one decode of each video takes a while)
        ctx.reporter.on_count("looking for scene cuts", done, total)

    return scan_videos([Path(video) for video in videos], cache=ctx.journal, on_progress=progress)


def _identity(video: Path) -> tuple[int, int]:
    """Size and mtime, what the cache keys a file by; (-1, -1) (never cached) for one that has gone."""
    try:
        stat = video.stat()
    except OSError:
        return -1, -1
    return stat.st_size, stat.st_mtime_ns


def scan_cuts(video: Path, detectors: list[DetectorSpec]) -> tuple[float, int, list[list[int]]]:
    """Decode ``video`` once, at most ``DETECTION_WIDTH`` wide, and feed every frame to each detector.

    Returns the fps, the number of frames decoded and, per detector, the frames at which a new scene starts.
    The benchmark measures detectors through this very function, so what it measures is what runs.
    """
    import av
    from scenedetect import FrameTimecode

    _video_info(video)
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
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            if fps <= 0:
                raise BadMedia(video, "has no frame rate")
            width, height = _detection_size(stream.codec_context.width, stream.codec_context.height)
            for frame in container.decode(stream):
                # BGR, as PySceneDetect's own video backends hand frames to its detectors.
                picture = frame.to_ndarray(width=width, height=height, format="bgr24")
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


def cut_scenes(video: Path, scenes: list[Scene], out_dir: Path, *, min_frames: int,
               stem: str | None = None) -> SplitResult:
    """Write each long-enough scene of ``video`` as its own mp4 in ``out_dir``, reusing clips already cut."""
    info = _video_info(video)  # an unreadable source fails before anything is written
    stat = video.stat()
    kept = [scene for scene in scenes if scene.frames >= min_frames]
    dropped = tuple((scene, f"{scene.frames} frames < {min_frames} (bucket frames)")
                    for scene in scenes if scene.frames < min_frames)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {scene.index: out_dir / f"{stem or video.stem}-scene-{scene.index:03d}.mp4" for scene in kept}
    tags = {scene.index: _TAG + json.dumps({"source": video.name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                            "start_frame": scene.start_frame, "end_frame": scene.end_frame},
                                           sort_keys=True) for scene in kept}
    todo = [scene for scene in kept if not _reusable(paths[scene.index], tags[scene.index], scene)]
    if todo:
        _encode(video, sorted(todo, key=lambda scene: scene.start_frame), paths, tags, info.fps)
    return SplitResult(tuple(SplitClip(paths[scene.index], scene) for scene in kept), dropped)


def _video_info(video: Path) -> MediaInfo:
    info = read_media_info(video)
    if info.kind != "video":
        raise BadMedia(video, "not a video")
    return info


def _reusable(path: Path, tag: str, scene: Scene) -> bool:
    """True when ``path`` is our clip of this very span; raises rather than touch a file that is not ours."""
    import av

    if not path.exists():
        return False
    try:
        with av.open(str(path)) as container:
            found = str(container.metadata.get("comment", ""))
        same = found == tag and read_media_info(path).frames == scene.frames
    except (av.FFmpegError, OSError, BadMedia):
        found, same = "", False
    if not found.startswith(_TAG):
        raise BadInput(f"{path.name} already exists and was not cut by ltx-pipeline", str(path),
                       "move it away, or cut into another folder or with another stem")
    return same


def _encode(video: Path, scenes: list[Scene], paths: dict[int, Path], tags: dict[int, str], fps: float) -> None:
    """One sequential decode of ``video``, each frame and audio sample routed to the clip of its scene."""
    import av

    starts = [scene.start_frame for scene in scenes]
    open_: dict[int, _ClipWriter] = {}
    done: set[int] = set()
    frame_index = 0
    try:
        with av.open(str(video)) as source:
            picture = source.streams.video[0]
            picture.thread_type = "AUTO"
            sound = source.streams.audio[0] if source.streams.audio else None
            rate = picture.average_rate or picture.guessed_rate or Fraction(fps)
            sample_rate = int(sound.codec_context.sample_rate or sound.rate) if sound is not None else 0
            layout = "mono" if sound is not None and sound.codec_context.channels == 1 else "stereo"
            resampler = av.AudioResampler(format="fltp", layout=layout, rate=sample_rate) if sound else None
            width, height = picture.codec_context.width // 2 * 2, picture.codec_context.height // 2 * 2

            def writer(scene: Scene) -> _ClipWriter:
                if scene.index not in open_:
                    open_[scene.index] = _ClipWriter(scene, paths[scene.index], tags[scene.index], Fraction(rate),
                                                     width, height, sample_rate, layout)
                return open_[scene.index]

            for frame in source.decode(*([picture] + ([sound] if sound is not None else []))):
                if isinstance(frame, av.VideoFrame):
                    slot = bisect.bisect_right(starts, frame_index) - 1
                    if slot >= 0 and frame_index < scenes[slot].end_frame:
                        writer(scenes[slot]).add_video(frame)
                    frame_index += 1
                elif isinstance(frame, av.AudioFrame) and resampler and frame.pts is not None and frame.time_base:
                    first = round(float(frame.pts * frame.time_base) * sample_rate)
                    for chunk in resampler.resample(frame):
                        samples = chunk.to_ndarray().astype(np.float32)
                        _route_audio(samples, first, sample_rate, scenes, starts, writer)
                        first += samples.shape[1]
                for index, clip in list(open_.items()):
                    if frame_index >= clip.scene.end_frame and (sound is None or clip.audio_done):
                        done.update([index] if clip.commit() else [])
                        del open_[index]
            for index, clip in list(open_.items()):  # the end of the file ends every scene still open
                done.update([index] if clip.commit() else [])
                del open_[index]
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(video, f"does not decode or encode ({str(exc).splitlines()[0][:160]})") from None
    finally:
        for clip in open_.values():
            clip.abort()
    missing = [scene for scene in scenes if scene.index not in done]
    if missing:
        raise BadMedia(video, f"has {frame_index} frames; scene {missing[0].index} ends at {missing[0].end_frame}")


def _route_audio(samples: Any, first: int, rate: int, scenes: list[Scene], starts: list[int],
                 writer: Callable[[Scene], _ClipWriter]) -> None:
    """Hand the samples ``[first, first + n)`` (source clock) to the scenes whose time span they overlap."""
    last = first + samples.shape[1]
    slot = max(0, bisect.bisect_right(starts, int(first / rate * scenes[0].fps)) - 1)
    for scene in scenes[slot:]:
        begin, end = round(scene.start_s * rate), round(scene.end_s * rate)
        if begin >= last:
            break
        lo, hi = max(first, begin), min(last, end)
        if lo < hi:
            writer(scene).add_audio(samples[:, lo - first:hi - first], lo - begin, hi >= end)


class _ClipWriter:
    """One clip being encoded into a temp file beside its final name; ``commit`` renames it into place."""

    def __init__(self, scene: Scene, path: Path, tag: str, rate: Fraction, width: int, height: int,
                 sample_rate: int, layout: str) -> None:
        import av

        self.scene, self.path, self.partial = scene, path, path.with_name(f".{path.name}.tmp.{os.getpid()}.mp4")
        self.container: Any = av.open(str(self.partial), "w")
        self.container.metadata["comment"] = tag
        self.video: Any = self.container.add_stream("libx264", rate=rate)
        self.video.width, self.video.height, self.video.pix_fmt = width, height, "yuv420p"
        self.video.options, self.frame_time = {"crf": "18"}, 1 / rate
        self.audio: Any = self.container.add_stream("aac", rate=sample_rate, layout=layout) if sample_rate else None
        self.sample_rate, self.layout, self.frames, self.audio_done = sample_rate, layout, 0, False

    def add_video(self, frame: Any) -> None:
        picture = frame.reformat(width=self.video.width, height=self.video.height, format="yuv420p")
        picture.pts, picture.time_base = self.frames, self.frame_time
        self.container.mux(self.video.encode(picture))
        self.frames += 1

    def add_audio(self, samples: Any, offset: int, last: bool) -> None:
        import av

        chunk = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples), format="fltp", layout=self.layout)
        chunk.sample_rate, chunk.pts, chunk.time_base = self.sample_rate, offset, Fraction(1, self.sample_rate)
        self.container.mux(self.audio.encode(chunk))
        self.audio_done = self.audio_done or last

    def commit(self) -> bool:
        """Finish the file and move it into place; False (nothing written) if the video ended inside the scene."""
        self.container.mux(self.video.encode(None))
        if self.audio is not None:
            self.container.mux(self.audio.encode(None))
        self.container.close()
        if self.frames != self.scene.frames:
            self.partial.unlink(missing_ok=True)
            return False
        os.replace(self.partial, self.path)
        return True

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # already failing: the temp file must go whatever close says
            self.container.close()
        self.partial.unlink(missing_ok=True)
