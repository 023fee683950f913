"""One long video's scene scan in time segments that together give exactly the cuts of the serial scan.

The serial scan (``detect.scan_cuts``) feeds every frame, in decode order, to one ``AdaptiveDetector`` and then
drops the cuts our flash / changed-share check rejects. Read from scenedetect's source (0.7), its state is:

- ``ContentDetector._last_frame``: frame ``j``'s score is its HSV distance to frame ``j - 1`` (the first frame
  fed gets 0.0, having no previous one);
- ``AdaptiveDetector._buffer``: frame ``t`` is a cut candidate when its score, over the mean of the
  ``window_width`` (2) scores each side, reaches the ratio, and is at least ``min_content_val``: frames
  ``t - window_width - 1`` to ``t + window_width`` decide it, nothing before;
- ``AdaptiveDetector._last_cut``: a candidate becomes a cut only ``min_scene_len`` frames after the previous cut
  (frame 0 before the first). That depends on a cut which can lie anywhere before, so it is not rebuilt by a
  warm-up: each segment reports every candidate (a detector with ``min_scene_len`` 0) and ``stitch`` re-applies
  the rule serially over the merged candidates, starting from frame 0 as the serial scan does;
- the flash / changed-share check (``detect._drop_false_cuts``) looks at frames ``c - flash_frames - 1`` to
  ``c + flash_frames`` of each cut ``c`` and nothing else, so it is decided per candidate in its segment.

So a segment owning frames ``[start, end)`` decodes ``[start - WARM_UP, end + TAIL)`` (clamped to the video), which
covers both windows. Frames are found by timestamp, never by an approximate seek: ``index_video`` demuxes the
packets (no decoding) for every frame's pts and the keyframes; a segment seeks to the keyframe at or before its
first frame, drops the frames before it, and checks that each frame decoded has the pts expected at its index (the
serial scan counts frames in decode output order). Any disagreement raises ``Misaligned`` and the caller scans the
whole video serially; the caller also compares the digests of the frames two neighbours both decode.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ltx_pipeline.ltx.media import BadMedia
from ltx_pipeline.scenes.detect import DetectorSpec, _detection_size, _drop_false_cuts, _scaler, _thumb

__all__ = ["TAIL", "WARM_UP", "Misaligned", "Segment", "SegmentScan", "VideoIndex", "index_video", "plan_segments",
           "scan_segment", "segmentable", "stitch"]

WARM_UP = 16  # frames decoded before a segment's own start: >= window_width + 1 and flash_frames + 1, with margin
TAIL = 16  # frames decoded after its end: >= window_width and flash_frames, with margin
_ZONE = WARM_UP + TAIL  # frames at each end of a segment whose digests neighbours compare (both decode them)


class Misaligned(Exception):
    """The frames a segment decoded are not the serial scan's frames at those indices: scan serially."""


def segmentable(spec: DetectorSpec) -> bool:
    """Whether ``spec``'s detector state is the one analysed above (AdaptiveDetector, window 2, and flash
    span within the warm-up); other detectors are scanned a whole video at a time."""
    return spec.kind == "adaptive" and max(spec.flash_frames, 2) + 1 <= WARM_UP and max(spec.flash_frames, 2) <= TAIL


@dataclass(frozen=True)
class VideoIndex:
    """Every frame's pts in presentation order (the serial scan's index order) and the keyframes' indices."""

    pts: tuple[int, ...]
    keyframes: tuple[int, ...]


@dataclass(frozen=True)
class Segment:
    """Frames ``own`` of ``video`` are this segment's; it decodes ``pts`` (those of frames ``first`` on)."""

    video: str
    number: int
    own: tuple[int, int]
    first: int
    pts: tuple[int, ...]
    last: bool  # decodes to the video's end (the serial scan's ``post_process`` runs there)


@dataclass(frozen=True)
class SegmentScan:
    """What one segment found: ``fps``, cut ``candidates`` in its own range (no ``min_scene_len`` applied),
    those of them the flash / changed-share check keeps, and the digests of its first and last frames."""

    fps: float
    candidates: tuple[int, ...]
    kept: tuple[int, ...]
    digests: dict[int, str]


def index_video(video: Path) -> VideoIndex:
    """Demux ``video``'s first video stream (no decoding); ``Misaligned`` if a packet has no pts."""
    import av

    stamps: list[int] = []
    keys: list[int] = []
    try:
        with av.open(str(video)) as container:
            stream = container.streams.video[0]
            for packet in container.demux(stream):
                if packet.size == 0:  # the flush packet at the end
                    continue
                if packet.pts is None:
                    raise Misaligned(f"{video}: a packet without a timestamp")
                stamps.append(int(packet.pts))
                if packet.is_keyframe:
                    keys.append(int(packet.pts))
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(video, f"does not decode ({str(exc).splitlines()[0][:160]})") from None
    ordered = sorted(stamps)
    if len(set(ordered)) != len(ordered):
        raise Misaligned(f"{video}: two frames with one timestamp")
    return VideoIndex(tuple(ordered), tuple(sorted(bisect_left(ordered, key) for key in keys)))


def plan_segments(video: str, index: VideoIndex, count: int) -> list[Segment]:
    """``count`` segments of about equal length, each starting ``WARM_UP`` frames after a keyframe where one is
    near (so the decode before its first own frame is short); fewer where the video is too short."""
    total = len(index.pts)
    starts = [0]
    for number in range(1, count):
        nominal = total * number // count
        near = min(index.keyframes, key=lambda key: abs(key + WARM_UP - nominal), default=0)
        start = near + WARM_UP if near and abs(near + WARM_UP - nominal) < total // (4 * count) else nominal
        if starts[-1] < start < total:
            starts.append(start)
    bounds = [*starts, total]
    segments = []
    for number, (start, end) in enumerate(zip(bounds, bounds[1:], strict=False)):
        first, stop = max(0, start - WARM_UP), min(total, end + TAIL)
        segments.append(Segment(video, number, (start, end), first, index.pts[first:stop], stop == total))
    return segments


def stitch(spec: DetectorSpec, scans: list[SegmentScan]) -> list[int]:
    """The serial scan's cuts from its segments' candidates: ``min_scene_len`` re-applied in order from frame 0
    (AdaptiveDetector's ``_last_cut`` starts at the first frame), then the flash / changed-share verdicts."""
    kept = {cut for scan in scans for cut in scan.kept}
    cuts, last = [], 0
    for candidate in sorted(cut for scan in scans for cut in scan.candidates):
        if candidate - last >= spec.min_scene_len:
            last = candidate
            if candidate in kept:
                cuts.append(candidate)
    return cuts


def scan_segment(segment: Segment, spec: DetectorSpec, threads: int = 1) -> SegmentScan:
    """Decode ``segment``'s frames and report its candidates (``Misaligned``: not the serial scan's frames)."""
    import av

    try:
        with av.open(segment.video) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.thread_count = threads
            rate = stream.average_rate or stream.guessed_rate
            fps = float(rate) if rate else 0.0
            if fps <= 0:
                raise BadMedia(Path(segment.video), "has no frame rate")
            if segment.first:
                container.seek(segment.pts[0], stream=stream, backward=True, any_frame=False)
            size = _detection_size(stream.codec_context.width, stream.codec_context.height)
            return _detect(container.decode(stream), segment, spec, fps, size)
    except (av.FFmpegError, OSError) as exc:
        raise BadMedia(Path(segment.video), f"does not decode ({str(exc).splitlines()[0][:160]})") from None


def _detect(frames: Any, segment: Segment, spec: DetectorSpec, fps: float, size: tuple[int, int]) -> SegmentScan:
    """The serial scan's loop over one segment's frames, with every candidate kept apart from the check."""
    from scenedetect import FrameTimecode

    detector = replace(spec, min_scene_len=0).make()  # every candidate: ``stitch`` applies min_scene_len
    span = max(spec.flash_frames, 1 if spec.min_changed else 0)
    candidates: list[int] = []
    found: list[int] = []  # candidates not (yet) dropped by the check
    checked: set[int] = set()
    thumbs: dict[int, Any] = {}
    digests: dict[int, str] = {}
    index, stop = segment.first, segment.first + len(segment.pts)
    scale = _scaler(*size)
    for frame in frames:
        if frame.pts is not None and frame.pts < segment.pts[0]:
            continue  # decoded from the keyframe before the segment: not yet its first frame
        if index == stop:
            if segment.last:  # a frame the packets did not announce: the serial scan would count it
                raise Misaligned(f"a frame after the last one expected ({stop})")
            break
        if frame.pts != segment.pts[index - segment.first]:
            raise Misaligned(f"frame {index} has pts {frame.pts}, expected {segment.pts[index - segment.first]}")
        picture = scale(frame)
        if index < segment.first + _ZONE or index >= stop - _ZONE:
            digests[index] = hashlib.blake2b(picture.tobytes(), digest_size=16).hexdigest()
        new = [int(cut.frame_num) for cut in detector.process_frame(FrameTimecode(index, fps), picture)]
        candidates += new
        found += new
        if span:
            thumbs[index] = _thumb(picture)
            thumbs.pop(index - 4 * span - 64, None)
            _drop_false_cuts(found, checked, spec, index, thumbs)
        index += 1
    if index != stop:
        raise Misaligned(f"decoding stopped at frame {index}, {stop} expected")
    if segment.last:
        new = [int(cut.frame_num) for cut in detector.post_process(FrameTimecode(index, fps))]
        candidates, found = candidates + new, found + new
    if span:
        _drop_false_cuts(found, checked, spec, index + spec.flash_frames, thumbs)
    start, end = segment.own
    return SegmentScan(fps, tuple(c for c in candidates if start <= c < end),
                       tuple(c for c in found if start <= c < end), digests)
